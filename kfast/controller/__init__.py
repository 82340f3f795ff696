"""The controller: cluster metadata as a log of records, and the state machines
(control managers) that turn admin requests into those records."""
