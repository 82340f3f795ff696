"""What the broker (kfast.server) and the coordinators (kfast.coordinator)
both build on, as Kafka's server-common module: the SystemTimer facade over
the timing wheel (kfast._ext.timer) and the purgatory of delayed operations.
It sits below both and imports neither."""
