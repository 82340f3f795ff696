"""The transaction coordinator (Kafka's TransactionCoordinator with its
TransactionStateManager), as deterministic state machines over
__transaction_state: records (the key/value codecs and placement), metadata
(TransactionState and TransactionMetadata's transitions), results (what a
handler hands the runtime: records to append, markers to write, the answer),
state_manager (the transactional ids of the partitions this broker leads:
loading by replay, appends, timeouts, expiration, listing) and coordinator
(the InitProducerId / AddPartitionsToTxn / AddOffsetsToTxn / EndTxn /
DescribeTransactions / ListTransactions handlers and the marker completion).
"""
