"""`python -m core.generate` is the documented entry point of `cli.generate` (kept so scripts that call it
keep working after the programs left core/); the program itself lives in cli/generate.py."""
from cli.generate import main

if __name__ == "__main__":
    main()
