"""Reading and writing tokenizers in other tools' file formats."""
