# CRC-32C's GIL policy now lives in crc.pxd (``from crc cimport crc32c_gil_aware``); this include
# forwards to it for the modules that still include it.

from crc cimport CRC32C_GIL_MIN, crc32c_gil_aware
