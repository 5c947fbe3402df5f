"""The topic SQL: topics, their subscriptions, a FIFO topic's deduplication ids and the signing key."""

from __future__ import annotations

import json
import sqlite3

from queueserver.models import Topic, TopicSubscription

_TOPIC_COLUMNS = "id, region, account, name, fifo, attributes, tags"
_SUBSCRIPTION_COLUMNS = "id, topic_id, arn, protocol, endpoint, owner, principal, attributes"


def _json(value: dict) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _topic(row: tuple) -> Topic:
    return Topic(id=row[0], region=row[1], account=row[2], name=row[3], fifo=bool(row[4]),
                 attributes=json.loads(row[5]), tags=json.loads(row[6]))


def _subscription(row: tuple) -> TopicSubscription:
    return TopicSubscription(id=row[0], topic_id=row[1], arn=row[2], protocol=row[3], endpoint=row[4],
                             owner=row[5], principal=row[6], attributes=json.loads(row[7]))


def load_topics(conn: sqlite3.Connection) -> list[Topic]:
    return [_topic(row) for row in conn.execute(f"SELECT {_TOPIC_COLUMNS} FROM topics")]


def load_subscriptions(conn: sqlite3.Connection) -> list[TopicSubscription]:
    return [_subscription(row) for row in conn.execute(f"SELECT {_SUBSCRIPTION_COLUMNS} FROM topic_subscriptions")]


def insert_topic(conn: sqlite3.Connection, region: str, account: str, name: str, fifo: bool,
                 attributes: dict[str, str], tags: dict[str, str], now_ms: int) -> Topic:
    row = conn.execute(
        f"INSERT INTO topics (region, account, name, fifo, attributes, tags, created_at_ms)"
        f" VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING {_TOPIC_COLUMNS}",
        (region, account, name, int(fifo), _json(attributes), _json(tags), now_ms)).fetchone()
    return _topic(row)


def update_topic(conn: sqlite3.Connection, topic_id: int, attributes: dict[str, str], tags: dict[str, str]) -> Topic:
    row = conn.execute(f"UPDATE topics SET attributes = ?, tags = ? WHERE id = ? RETURNING {_TOPIC_COLUMNS}",
                       (_json(attributes), _json(tags), topic_id)).fetchone()
    return _topic(row)


def delete_topic(conn: sqlite3.Connection, topic_id: int) -> None:
    """The topic, its subscriptions and its deduplication ids."""
    conn.execute("DELETE FROM topic_subscriptions WHERE topic_id = ?", (topic_id,))
    conn.execute("DELETE FROM topic_deduplication WHERE topic_id = ?", (topic_id,))
    conn.execute("DELETE FROM topics WHERE id = ?", (topic_id,))


def insert_subscription(conn: sqlite3.Connection, topic_id: int, arn: str, protocol: str, endpoint: str, owner: str,
                        principal: str, attributes: dict[str, str], now_ms: int) -> TopicSubscription:
    row = conn.execute(
        f"INSERT INTO topic_subscriptions (topic_id, arn, protocol, endpoint, owner, principal, attributes,"
        f" created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING {_SUBSCRIPTION_COLUMNS}",
        (topic_id, arn, protocol, endpoint, owner, principal, _json(attributes), now_ms)).fetchone()
    return _subscription(row)


def update_subscription(conn: sqlite3.Connection, subscription_id: int,
                        attributes: dict[str, str]) -> TopicSubscription:
    row = conn.execute(
        f"UPDATE topic_subscriptions SET attributes = ? WHERE id = ? RETURNING {_SUBSCRIPTION_COLUMNS}",
        (_json(attributes), subscription_id)).fetchone()
    return _subscription(row)


def delete_subscription(conn: sqlite3.Connection, subscription_id: int) -> None:
    conn.execute("DELETE FROM topic_subscriptions WHERE id = ?", (subscription_id,))


def next_sequence(conn: sqlite3.Connection, topic_id: int) -> int:
    """The FIFO topic's next SequenceNumber (it only grows, across restarts)."""
    return int(conn.execute("UPDATE topics SET sequence = sequence + 1 WHERE id = ? RETURNING sequence",
                            (topic_id,)).fetchone()[0])


def find_duplicate(conn: sqlite3.Connection, topic_id: int, deduplication_id: str,
                   now_ms: int) -> tuple[str, str] | None:
    """(MessageId, SequenceNumber) of a publish with this deduplication id within its five minutes."""
    row = conn.execute(
        "SELECT message_id, sequence_number FROM topic_deduplication"
        " WHERE topic_id = ? AND deduplication_id = ? AND expires_at_ms > ?",
        (topic_id, deduplication_id, now_ms)).fetchone()
    return None if row is None else (row[0], row[1])


def remember_deduplication(conn: sqlite3.Connection, topic_id: int, deduplication_id: str, expires_at_ms: int,
                           message_id: str, sequence: str) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO topic_deduplication (topic_id, deduplication_id, expires_at_ms, message_id,"
        " sequence_number) VALUES (?, ?, ?, ?, ?)", (topic_id, deduplication_id, expires_at_ms, message_id, sequence))


def forget_expired_deduplication(conn: sqlite3.Connection, topic_id: int, now_ms: int) -> None:
    conn.execute("DELETE FROM topic_deduplication WHERE topic_id = ? AND expires_at_ms <= ?", (topic_id, now_ms))


def signing_material(conn: sqlite3.Connection) -> tuple[str, str] | None:
    """(key PEM, certificate PEM) of the database's envelope signer, None before the first is made."""
    row = conn.execute("SELECT key_pem, cert_pem FROM topic_signing WHERE id = 1").fetchone()
    return None if row is None else (row[0], row[1])


def keep_signing_material(conn: sqlite3.Connection, key_pem: str, cert_pem: str) -> tuple[str, str]:
    """Keep the signer unless one is kept already; returns the one kept."""
    conn.execute("INSERT OR IGNORE INTO topic_signing (id, key_pem, cert_pem) VALUES (1, ?, ?)", (key_pem, cert_pem))
    kept = signing_material(conn)
    assert kept is not None
    return kept
