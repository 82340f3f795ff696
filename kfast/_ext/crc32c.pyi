from typing_extensions import Buffer

def crc32c(data: Buffer, crc: int = 0) -> int:
    """CRC-32C of data continuing crc (0 to start); equals the crc32c package."""

def implementation() -> str:
    """'hardware' or 'software'."""

def hardware_available() -> bool: ...
def _force_implementation(which: str) -> None:
    """Test hook: 'software', 'hardware' or 'auto'."""
