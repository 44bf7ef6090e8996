"""Named agent definitions (TOML): `rules` is the pure logic, `store` reads and writes files."""
