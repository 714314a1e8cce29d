"""CLI subcommands; each module has ``register(subparsers)`` (see ``engine.cli``)."""
