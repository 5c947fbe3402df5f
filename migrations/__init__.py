"""The numbered SQL migrations, shipped as package data of queueserver.migrations."""
