"""The broker: network, request dispatch, replica manager, partitions, purgatories and timers."""
