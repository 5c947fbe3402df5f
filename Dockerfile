# queueserver in a container: `queueserver serve` on port 9324 of every interface inside, the database in /data.
#   docker build -t queueserver . && docker run --rm -p 127.0.0.1:9324:9324 -v queueserver-data:/data queueserver
# Arguments after the image name are serve's options; docs/operations.md, "In a container", says the rest.
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \
    && apt-get clean && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml README.md LICENSE NOTICE /src/
COPY queueserver /src/queueserver
COPY migrations /src/migrations
# The replicate extra brings Litestream's binary, so that --replicate and `queueserver restore` work here too.
RUN python3 -m venv /opt/queueserver \
    && /opt/queueserver/bin/pip install --no-cache-dir --disable-pip-version-check '/src[replicate]' \
    && rm -rf /src \
    && useradd --uid 10001 --user-group --home-dir /data --no-create-home --shell /usr/sbin/nologin queueserver \
    && mkdir /data && chown queueserver:queueserver /data
USER queueserver
WORKDIR /data
# The environment ranks above a config file: give --host or --db as arguments to change them.
ENV PATH=/opt/queueserver/bin:$PATH QUEUESERVER_HOST=0.0.0.0 QUEUESERVER_DB=/data/queueserver.db
VOLUME /data
EXPOSE 9324
# /ready: 200 once the database takes writes. QUEUESERVER_PORT moves the check with the server.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["python3", "-c", "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/ready' % os.environ.get('QUEUESERVER_PORT', '9324'), timeout=4)"]
# Exec form: the server is PID 1 and gets SIGTERM itself; it closes the database and exits 0.
ENTRYPOINT ["queueserver", "serve"]
