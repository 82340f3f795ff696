"""kfast storage: Kafka's log directory format, synchronous and thread-safe per log.

The API the broker (and tools) code against:

    from kfast.storage.manager import LogManager
    manager = LogManager(kafka_config, cluster_id=..., topic_configs=lambda topic: {...})
    manager.startup()                          # identity checks, load + recover all logs
    log = manager.get_or_create_log(topic, partition, topic_id=None, overrides=None)
    manager.get_log(topic, partition) / all_logs() / delete_log(topic, partition)
    manager.update_topic_config(topic, overrides)        # AlterConfigs, applied live
    # periodic jobs (blocking: run them in an executor)
    manager.cleanup_logs(now)      # retention, .deleted files, -delete dirs, expired producers
    manager.clean_logs(now)        # compaction of cleanup.policy=compact logs
    manager.flush_dirty_logs(now)  # flush.ms
    manager.checkpoint_recovery_offsets() / checkpoint_log_start_offsets() /
    manager.checkpoint_high_watermarks()
    manager.shutdown(broker_epoch)  # flush, snapshots, checkpoints, clean-shutdown marker

    log = kfast.storage.log.Log
    info = log.append_as_leader(records, leader_epoch, origin)  -> LogAppendInfo
    info = log.append_as_follower(records)
    data = log.read(offset, max_bytes, upper_bound, min_one_message) -> FetchDataInfo
           (data.records is a kfast.protocol.file_region.FileRegion or None)
    log.collect_aborted_transactions(start, upper_bound)   # read_committed
    log.fetch_offset_by_timestamp(ts)                       # ListOffsets (-1, -2, -3 too)
    log.log_start_offset, log.log_end_offset, log.high_watermark,
    log.last_stable_offset, log.recovery_point
    log.update_high_watermark(hw); log.delete_records_before(offset)
    log.truncate_to(offset); log.truncate_fully_and_start_at(offset); log.roll()
    log.flush()                    # blocking fsync
    log.leader_epoch_cache.end_offset_for(epoch, log.log_end_offset)
    log.producer_state             # ProducerStateManager (idempotence, transactions)

Errors are kfast.protocol.errors exceptions: CorruptRecordException,
InvalidRecordException, RecordTooLargeException, InvalidTimestampException,
OffsetOutOfRangeException, KafkaStorageException, OutOfOrderSequenceException,
InvalidProducerEpochException, InvalidTxnStateException,
TransactionCoordinatorFencedException.
"""
