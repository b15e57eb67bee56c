"""Suite-wide pytest settings: markers are declared in pyproject.toml; nothing global lives here."""
