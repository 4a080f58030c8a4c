"""``python -m medrewardbench.cli``: the ``medrewardbench`` command."""

from medrewardbench.cli.main import main

if __name__ == "__main__":
    main()
