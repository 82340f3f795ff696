"""The group coordinator: ClassicGroup state machine (classic_group),
delayed operations (delayed), GroupCoordinator (coordinator, offsets), the
__consumer_offsets record codecs (records) and the broker runtime (runtime).
"""
