"""One module per Kafka API: its REQUEST and RESPONSE grammar.

The grammar is described in kfast.protocol.schema; the API table (keys,
version ranges, flexible versions, listeners) is kfast.protocol.api_keys.
Modules are imported on first use of their API.
"""
