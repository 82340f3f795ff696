from typing_extensions import Buffer

def crc32c(data: Buffer, crc: int = 0) -> int:
    """CRC-32C of data continuing crc (0 to start); equals the crc32c package."""

def implementation() -> str:
    """'vpclmul', 'pclmul', 'hardware' or 'software'."""

def available_implementations() -> list[str]:
    """Implementations this CPU supports, slowest first."""

def hardware_available() -> bool: ...
def _force_implementation(which: str) -> None:
    """Test hook: a name from available_implementations(), or 'auto'."""
