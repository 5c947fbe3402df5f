from queueserver.cli import main

raise SystemExit(main())
