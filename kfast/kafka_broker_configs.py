"""Kafka 4.2's broker configs: every name with its type, default and
dynamic update mode (read-only / per-broker / cluster-wide), the facts
behind DescribeConfigs on a BROKER resource and the "Cannot update these
configs dynamically" refusal of (Incremental)AlterConfigs.

This is a catalogue of Kafka's names, not kfast's configuration: the
properties kfast serves are kfast.config's define() rows, which win over
these defaults wherever both name a config.

Where the facts come from:
- names, types and defaults: the ConfigDefs merged into Kafka's
  AbstractKafkaConfig.CONFIG_DEF (ServerConfigs, KRaftConfigs,
  SocketServerConfigs, ReplicationConfigs, GroupCoordinatorConfig,
  CleanerConfig, LogConfig.SERVER_CONFIG_DEF, ShareGroupConfig,
  ShareCoordinatorConfig, TransactionLogConfig,
  TransactionStateManagerConfig, QuorumConfig, MetricConfigs, QuotaConfig,
  BrokerSecurityConfigs, DelegationTokenManagerConfigs,
  RemoteLogManagerConfig), read from the apache/kafka source (trunk of
  October 2024), internal configs (defineInternal) left out as Kafka's
  DescribeConfigs leaves them out; with what Kafka 4.0 removed taken out:
  ZkConfigs,
  PasswordEncoderConfigs, inter.broker.protocol.version,
  log.message.format.version, log.message.timestamp.difference.max.ms,
  log.message.downconversion.enable, broker.id.generation.enable,
  reserved.broker.max.id, control.plane.listener.name,
  offsets.commit.required.acks, zookeeper.metadata.migration.*,
  auto.include.jmx.reporter, delegation.token.master.key,
  controlled.shutdown.max.retries, controlled.shutdown.retry.backoff.ms,
  leader.imbalance.per.broker.percentage, eligible.leader.replicas.enable
  (a feature since 4.1), group.share.max.groups; and the configs added in
  4.0-4.2 (group.streams.*, group.share.*, sasl.oauthbearer.assertion.*,
  remote.log.manager.task.retry.*, ...) with the defaults changed there
  (remote.log.manager.*thread.pool.size, group.coordinator.threads,
  *.append.linger.ms) taken from a 4.x broker's "KafkaConfig values" start-up
  log, less what that log shows of 4.3 (KIP-1263's *.assignment.interval.ms,
  group.coordinator.background.threads, *.cached.buffer.max.bytes,
  follower.fetch.last.tiered.offset.enable, controller.quorum.auto.join
  .enable, cordoned.log.dirs) and its internal configs;
- update modes: Kafka's DynamicBrokerConfig.AllDynamicConfigs (the
  reconfigurables' ReconfigurableConfigs sets, below) and its
  dynamicConfigUpdateModes: per-broker for the SSL and listener configs
  except max.connections, max.connection.creation.rate and
  num.network.threads; cluster-wide for the other dynamic ones; read-only
  for every other config.

Defaults are strings as DescribeConfigs prints them (None: no default).
"""

from __future__ import annotations

from typing import NamedTuple

from kfast.config import Type

READ_ONLY = "read-only"
PER_BROKER = "per-broker"
CLUSTER_WIDE = "cluster-wide"

BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = (
    Type.BOOLEAN,
    Type.STRING,
    Type.INT,
    Type.SHORT,
    Type.LONG,
    Type.DOUBLE,
    Type.LIST,
    Type.CLASS,
    Type.PASSWORD,
)


class BrokerConfigDef(NamedTuple):
    type: Type
    default: str | None
    mode: str


# SslConfigs.RECONFIGURABLE_CONFIGS (DynamicSecurityConfigs): dynamic only
# with a listener prefix ("These security configs can be dynamically updated
# only per-listener using the listener prefix").
LISTENER_ONLY_SECURITY_CONFIGS = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.certificates",
    }
)

# DynamicListenerConfig.ReconfigurableConfigs.
LISTENER_CONFIGS = frozenset(
    {
        "advertised.listeners",
        "listeners",
        "listener.security.protocol.map",
        "principal.builder.class",
        "ssl.protocol",
        "ssl.provider",
        "ssl.cipher.suites",
        "ssl.enabled.protocols",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.endpoint.identification.algorithm",
        "ssl.secure.random.implementation",
        "ssl.client.auth",
        "ssl.engine.factory.class",
        "sasl.mechanism.inter.broker.protocol",
        "sasl.jaas.config",
        "sasl.enabled.mechanisms",
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
        "max.connections",
        "max.connection.creation.rate",
        "num.network.threads",
    }
)

# DynamicBrokerConfig.ClusterLevelListenerConfigs: listener configs that are
# cluster-wide (and may carry a listener prefix).
CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset(
    {"max.connections", "max.connection.creation.rate", "num.network.threads"}
)

# Listener configs given per listener *and* SASL mechanism
# (listener.name.<l>.<mechanism>.<config>; DynamicBrokerConfig
# .ListenerMechanismConfigs).
LISTENER_MECHANISM_CONFIGS = frozenset(
    {
        "sasl.jaas.config",
        "sasl.login.callback.handler.class",
        "sasl.login.class",
        "sasl.server.callback.handler.class",
        "connections.max.reauth.ms",
    }
)

# The primary server synonym of every topic config but message.format.version
# (DynamicLogConfig.ReconfigurableConfigs from ServerTopicConfigSynonyms
# .TOPIC_CONFIG_SYNONYMS: log.retention.ms is dynamic, log.retention.hours
# is not).
LOG_CONFIGS = frozenset(
    {
        "log.segment.bytes",
        "log.roll.ms",
        "log.roll.jitter.ms",
        "log.index.size.max.bytes",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.retention.bytes",
        "log.retention.ms",
        "message.max.bytes",
        "log.index.interval.bytes",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        "log.segment.delete.delay.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleanup.policy",
        "unclean.leader.election.enable",
        "min.insync.replicas",
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "log.preallocate",
        "log.message.timestamp.type",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.after.max.ms",
        "log.local.retention.ms",
        "log.local.retention.bytes",
    }
)

CLUSTER_WIDE_CONFIGS = (
    LOG_CONFIGS
    | frozenset(
        {
            # LogCleaner.ReconfigurableConfigs
            "log.cleaner.threads",
            "log.cleaner.dedupe.buffer.size",
            "log.cleaner.io.buffer.load.factor",
            "log.cleaner.io.buffer.size",
            "log.cleaner.io.max.bytes.per.second",
            "log.cleaner.backoff.ms",
            # DynamicThreadPool.ReconfigurableConfigs
            "num.io.threads",
            "num.replica.fetchers",
            "num.recovery.threads.per.data.dir",
            "background.threads",
            # DynamicMetricsReporters
            "metric.reporters",
            # SocketServer.ReconfigurableConfigs
            "max.connections.per.ip",
            "max.connections.per.ip.overrides",
            # DynamicProducerStateManagerConfig
            "producer.id.expiration.ms",
            "transaction.partition.verification.enable",
            # DynamicRemoteLogConfig.ReconfigurableConfigs
            "remote.log.index.file.cache.total.size.bytes",
            "remote.fetch.max.wait.ms",
            "remote.log.manager.copy.max.bytes.per.second",
            "remote.log.manager.fetch.max.bytes.per.second",
            "remote.list.offsets.request.timeout.ms",
        }
    )
    | CLUSTER_LEVEL_LISTENER_CONFIGS
)

PER_BROKER_CONFIGS = (
    LISTENER_ONLY_SECURITY_CONFIGS | LISTENER_CONFIGS
) - CLUSTER_LEVEL_LISTENER_CONFIGS


def _mode(name: str) -> str:
    if name in PER_BROKER_CONFIGS:
        return PER_BROKER
    return CLUSTER_WIDE if name in CLUSTER_WIDE_CONFIGS else READ_ONLY


_ROWS = {
    "add.partitions.to.txn.retry.backoff.max.ms": (INT, "100"),
    "add.partitions.to.txn.retry.backoff.ms": (INT, "20"),
    "advertised.listeners": (STRING, None),
    "alter.config.policy.class.name": (CLASS, None),
    "alter.log.dirs.replication.quota.window.num": (INT, "11"),
    "alter.log.dirs.replication.quota.window.size.seconds": (INT, "1"),
    "authorizer.class.name": (STRING, ""),
    "auto.create.topics.enable": (BOOLEAN, "true"),
    "auto.leader.rebalance.enable": (BOOLEAN, "true"),
    "background.threads": (INT, "10"),
    "broker.heartbeat.interval.ms": (INT, "2000"),
    "broker.id": (INT, "-1"),
    "broker.rack": (STRING, None),
    "broker.session.timeout.ms": (INT, "9000"),
    "client.quota.callback.class": (CLASS, None),
    "compression.gzip.level": (INT, "-1"),
    "compression.lz4.level": (INT, "9"),
    "compression.type": (STRING, "producer"),
    "compression.zstd.level": (INT, "3"),
    "config.providers": (LIST, ""),
    "connection.failed.authentication.delay.ms": (INT, "100"),
    "connections.max.idle.ms": (LONG, "600000"),
    "connections.max.reauth.ms": (LONG, "0"),
    "controlled.shutdown.enable": (BOOLEAN, "true"),
    "controller.listener.names": (STRING, None),
    "controller.performance.always.log.threshold.ms": (LONG, "2000"),
    "controller.performance.sample.period.ms": (LONG, "60000"),
    "controller.quorum.append.linger.ms": (INT, "25"),
    "controller.quorum.bootstrap.servers": (LIST, ""),
    "controller.quorum.election.backoff.max.ms": (INT, "1000"),
    "controller.quorum.election.timeout.ms": (INT, "1000"),
    "controller.quorum.fetch.max.bytes": (INT, "1048576"),
    "controller.quorum.fetch.snapshot.max.bytes": (INT, "1048576"),
    "controller.quorum.fetch.timeout.ms": (INT, "2000"),
    "controller.quorum.request.timeout.ms": (INT, "2000"),
    "controller.quorum.retry.backoff.ms": (INT, "20"),
    "controller.quorum.voters": (LIST, ""),
    "controller.quota.window.num": (INT, "11"),
    "controller.quota.window.size.seconds": (INT, "1"),
    "controller.socket.timeout.ms": (INT, "30000"),
    "create.topic.policy.class.name": (CLASS, None),
    "default.replication.factor": (INT, "1"),
    "delegation.token.expiry.check.interval.ms": (LONG, "3600000"),
    "delegation.token.expiry.time.ms": (LONG, "86400000"),
    "delegation.token.max.lifetime.ms": (LONG, "604800000"),
    "delegation.token.secret.key": (PASSWORD, None),
    "delete.records.purgatory.purge.interval.requests": (INT, "1"),
    "delete.topic.enable": (BOOLEAN, "true"),
    "early.start.listeners": (STRING, None),
    "fetch.max.bytes": (INT, "57671680"),
    "fetch.purgatory.purge.interval.requests": (INT, "1000"),
    "group.consumer.assignors": (LIST, "uniform,range"),
    "group.consumer.heartbeat.interval.ms": (INT, "5000"),
    "group.consumer.max.heartbeat.interval.ms": (INT, "15000"),
    "group.consumer.max.session.timeout.ms": (INT, "60000"),
    "group.consumer.max.size": (INT, "2147483647"),
    "group.consumer.migration.policy": (STRING, "bidirectional"),
    "group.consumer.min.heartbeat.interval.ms": (INT, "5000"),
    "group.consumer.min.session.timeout.ms": (INT, "45000"),
    "group.consumer.regex.refresh.interval.ms": (INT, "600000"),
    "group.consumer.session.timeout.ms": (INT, "45000"),
    "group.coordinator.append.linger.ms": (INT, "-1"),
    "group.coordinator.rebalance.protocols": (LIST, "classic,consumer,streams"),
    "group.coordinator.threads": (INT, "4"),
    "group.initial.rebalance.delay.ms": (INT, "3000"),
    "group.max.session.timeout.ms": (INT, "1800000"),
    "group.max.size": (INT, "2147483647"),
    "group.min.session.timeout.ms": (INT, "6000"),
    "group.share.assignors": (LIST, "simple"),
    "group.share.delivery.count.limit": (INT, "5"),
    "group.share.heartbeat.interval.ms": (INT, "5000"),
    "group.share.initialize.retry.interval.ms": (INT, "30000"),
    "group.share.max.delivery.count.limit": (INT, "10"),
    "group.share.max.heartbeat.interval.ms": (INT, "15000"),
    "group.share.max.partition.max.record.locks": (INT, "4000"),
    "group.share.max.record.lock.duration.ms": (INT, "60000"),
    "group.share.max.session.timeout.ms": (INT, "60000"),
    "group.share.max.share.sessions": (INT, "2000"),
    "group.share.max.size": (INT, "200"),
    "group.share.min.delivery.count.limit": (INT, "2"),
    "group.share.min.heartbeat.interval.ms": (INT, "5000"),
    "group.share.min.partition.max.record.locks": (INT, "100"),
    "group.share.min.record.lock.duration.ms": (INT, "15000"),
    "group.share.min.session.timeout.ms": (INT, "45000"),
    "group.share.partition.max.record.locks": (INT, "2000"),
    "group.share.record.lock.duration.ms": (INT, "30000"),
    "group.share.session.timeout.ms": (INT, "45000"),
    "group.streams.heartbeat.interval.ms": (INT, "5000"),
    "group.streams.initial.rebalance.delay.ms": (INT, "3000"),
    "group.streams.max.heartbeat.interval.ms": (INT, "15000"),
    "group.streams.max.session.timeout.ms": (INT, "60000"),
    "group.streams.max.size": (INT, "2147483647"),
    "group.streams.max.standby.replicas": (INT, "2"),
    "group.streams.min.heartbeat.interval.ms": (INT, "5000"),
    "group.streams.min.session.timeout.ms": (INT, "45000"),
    "group.streams.num.standby.replicas": (INT, "0"),
    "group.streams.session.timeout.ms": (INT, "45000"),
    "initial.broker.registration.timeout.ms": (INT, "60000"),
    "inter.broker.listener.name": (STRING, None),
    "kafka.metrics.polling.interval.secs": (INT, "10"),
    "kafka.metrics.reporters": (LIST, ""),
    "leader.imbalance.check.interval.seconds": (LONG, "300"),
    "listener.security.protocol.map": (
        STRING,
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
    ),
    "listeners": (STRING, "PLAINTEXT://:9092"),
    "log.cleaner.backoff.ms": (LONG, "15000"),
    "log.cleaner.dedupe.buffer.size": (LONG, "134217728"),
    "log.cleaner.delete.retention.ms": (LONG, "86400000"),
    "log.cleaner.enable": (BOOLEAN, "true"),
    "log.cleaner.io.buffer.load.factor": (DOUBLE, "0.9"),
    "log.cleaner.io.buffer.size": (INT, "524288"),
    "log.cleaner.io.max.bytes.per.second": (DOUBLE, "1.7976931348623157e+308"),
    "log.cleaner.max.compaction.lag.ms": (LONG, "9223372036854775807"),
    "log.cleaner.min.cleanable.ratio": (DOUBLE, "0.5"),
    "log.cleaner.min.compaction.lag.ms": (LONG, "0"),
    "log.cleaner.threads": (INT, "1"),
    "log.cleanup.policy": (LIST, "delete"),
    "log.dir": (STRING, "/tmp/kafka-logs"),
    "log.dir.failure.timeout.ms": (LONG, "30000"),
    "log.dirs": (STRING, None),
    "log.flush.interval.messages": (LONG, "9223372036854775807"),
    "log.flush.interval.ms": (LONG, None),
    "log.flush.offset.checkpoint.interval.ms": (INT, "60000"),
    "log.flush.scheduler.interval.ms": (LONG, "9223372036854775807"),
    "log.flush.start.offset.checkpoint.interval.ms": (INT, "60000"),
    "log.index.interval.bytes": (INT, "4096"),
    "log.index.size.max.bytes": (INT, "10485760"),
    "log.local.retention.bytes": (LONG, "-2"),
    "log.local.retention.ms": (LONG, "-2"),
    "log.message.timestamp.after.max.ms": (LONG, "9223372036854775807"),
    "log.message.timestamp.before.max.ms": (LONG, "9223372036854775807"),
    "log.message.timestamp.type": (STRING, "CreateTime"),
    "log.preallocate": (BOOLEAN, "false"),
    "log.retention.bytes": (LONG, "-1"),
    "log.retention.check.interval.ms": (LONG, "300000"),
    "log.retention.hours": (INT, "168"),
    "log.retention.minutes": (INT, None),
    "log.retention.ms": (LONG, None),
    "log.roll.hours": (INT, "168"),
    "log.roll.jitter.hours": (INT, "0"),
    "log.roll.jitter.ms": (LONG, None),
    "log.roll.ms": (LONG, None),
    "log.segment.bytes": (INT, "1073741824"),
    "log.segment.delete.delay.ms": (LONG, "60000"),
    "max.connection.creation.rate": (INT, "2147483647"),
    "max.connections": (INT, "2147483647"),
    "max.connections.per.ip": (INT, "2147483647"),
    "max.connections.per.ip.overrides": (STRING, ""),
    "max.incremental.fetch.session.cache.slots": (INT, "1000"),
    "max.request.partition.size.limit": (INT, "2000"),
    "message.max.bytes": (INT, "1048588"),
    "metadata.log.dir": (STRING, None),
    "metadata.log.max.record.bytes.between.snapshots": (LONG, "20971520"),
    "metadata.log.max.snapshot.interval.ms": (LONG, "3600000"),
    "metadata.log.segment.bytes": (INT, "1073741824"),
    "metadata.log.segment.ms": (LONG, "604800000"),
    "metadata.max.idle.interval.ms": (INT, "500"),
    "metadata.max.retention.bytes": (LONG, "104857600"),
    "metadata.max.retention.ms": (LONG, "604800000"),
    "metric.reporters": (LIST, "org.apache.kafka.common.metrics.JmxReporter"),
    "metrics.num.samples": (INT, "2"),
    "metrics.recording.level": (STRING, "INFO"),
    "metrics.sample.window.ms": (LONG, "30000"),
    "min.insync.replicas": (INT, "1"),
    "node.id": (INT, "-1"),
    "num.io.threads": (INT, "8"),
    "num.network.threads": (INT, "3"),
    "num.partitions": (INT, "1"),
    "num.recovery.threads.per.data.dir": (INT, "1"),
    "num.replica.alter.log.dirs.threads": (INT, None),
    "num.replica.fetchers": (INT, "1"),
    "offset.metadata.max.bytes": (INT, "4096"),
    "offsets.commit.timeout.ms": (INT, "5000"),
    "offsets.load.buffer.size": (INT, "5242880"),
    "offsets.retention.check.interval.ms": (LONG, "600000"),
    "offsets.retention.minutes": (INT, "10080"),
    "offsets.topic.compression.codec": (INT, "0"),
    "offsets.topic.num.partitions": (INT, "50"),
    "offsets.topic.replication.factor": (SHORT, "3"),
    "offsets.topic.segment.bytes": (INT, "104857600"),
    "principal.builder.class": (
        CLASS,
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
    ),
    "process.roles": (LIST, ""),
    "producer.id.expiration.check.interval.ms": (INT, "600000"),
    "producer.id.expiration.ms": (INT, "86400000"),
    "producer.purgatory.purge.interval.requests": (INT, "1000"),
    "queued.max.request.bytes": (LONG, "-1"),
    "queued.max.requests": (INT, "500"),
    "quota.window.num": (INT, "11"),
    "quota.window.size.seconds": (INT, "1"),
    "remote.fetch.max.wait.ms": (INT, "500"),
    "remote.list.offsets.request.timeout.ms": (LONG, "30000"),
    "remote.log.index.file.cache.total.size.bytes": (LONG, "1073741824"),
    "remote.log.index.file.cache.ttl.ms": (LONG, "900000"),
    "remote.log.manager.copier.thread.pool.size": (INT, "10"),
    "remote.log.manager.copy.max.bytes.per.second": (LONG, "9223372036854775807"),
    "remote.log.manager.copy.quota.window.num": (INT, "11"),
    "remote.log.manager.copy.quota.window.size.seconds": (INT, "1"),
    "remote.log.manager.expiration.thread.pool.size": (INT, "10"),
    "remote.log.manager.fetch.max.bytes.per.second": (LONG, "9223372036854775807"),
    "remote.log.manager.fetch.quota.window.num": (INT, "11"),
    "remote.log.manager.fetch.quota.window.size.seconds": (INT, "1"),
    "remote.log.manager.follower.thread.pool.size": (INT, "2"),
    "remote.log.manager.task.interval.ms": (LONG, "30000"),
    "remote.log.manager.task.retry.backoff.max.ms": (LONG, "30000"),
    "remote.log.manager.task.retry.backoff.ms": (LONG, "500"),
    "remote.log.manager.task.retry.jitter": (DOUBLE, "0.2"),
    "remote.log.manager.thread.pool.size": (INT, "2"),
    "remote.log.metadata.custom.metadata.max.bytes": (INT, "128"),
    "remote.log.metadata.manager.class.name": (
        STRING,
        "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager",
    ),
    "remote.log.metadata.manager.class.path": (STRING, None),
    "remote.log.metadata.manager.impl.prefix": (STRING, "rlmm.config."),
    "remote.log.metadata.manager.listener.name": (STRING, None),
    "remote.log.reader.max.pending.tasks": (INT, "100"),
    "remote.log.reader.threads": (INT, "10"),
    "remote.log.storage.manager.class.name": (STRING, None),
    "remote.log.storage.manager.class.path": (STRING, None),
    "remote.log.storage.manager.impl.prefix": (STRING, "rsm.config."),
    "remote.log.storage.system.enable": (BOOLEAN, "false"),
    "replica.fetch.backoff.ms": (INT, "1000"),
    "replica.fetch.max.bytes": (INT, "1048576"),
    "replica.fetch.min.bytes": (INT, "1"),
    "replica.fetch.response.max.bytes": (INT, "10485760"),
    "replica.fetch.wait.max.ms": (INT, "500"),
    "replica.high.watermark.checkpoint.interval.ms": (LONG, "5000"),
    "replica.lag.time.max.ms": (LONG, "30000"),
    "replica.selector.class": (STRING, None),
    "replica.socket.receive.buffer.bytes": (INT, "65536"),
    "replica.socket.timeout.ms": (INT, "30000"),
    "replication.quota.window.num": (INT, "11"),
    "replication.quota.window.size.seconds": (INT, "1"),
    "request.timeout.ms": (INT, "30000"),
    "sasl.client.callback.handler.class": (CLASS, None),
    "sasl.enabled.mechanisms": (LIST, "GSSAPI"),
    "sasl.jaas.config": (PASSWORD, None),
    "sasl.kerberos.kinit.cmd": (STRING, "/usr/bin/kinit"),
    "sasl.kerberos.min.time.before.relogin": (LONG, "60000"),
    "sasl.kerberos.principal.to.local.rules": (LIST, "DEFAULT"),
    "sasl.kerberos.service.name": (STRING, None),
    "sasl.kerberos.ticket.renew.jitter": (DOUBLE, "0.05"),
    "sasl.kerberos.ticket.renew.window.factor": (DOUBLE, "0.8"),
    "sasl.login.callback.handler.class": (CLASS, None),
    "sasl.login.class": (CLASS, None),
    "sasl.login.connect.timeout.ms": (INT, None),
    "sasl.login.read.timeout.ms": (INT, None),
    "sasl.login.refresh.buffer.seconds": (SHORT, "300"),
    "sasl.login.refresh.min.period.seconds": (SHORT, "60"),
    "sasl.login.refresh.window.factor": (DOUBLE, "0.8"),
    "sasl.login.refresh.window.jitter": (DOUBLE, "0.05"),
    "sasl.login.retry.backoff.max.ms": (LONG, "10000"),
    "sasl.login.retry.backoff.ms": (LONG, "100"),
    "sasl.mechanism.controller.protocol": (STRING, "GSSAPI"),
    "sasl.mechanism.inter.broker.protocol": (STRING, "GSSAPI"),
    "sasl.oauthbearer.assertion.algorithm": (STRING, "RS256"),
    "sasl.oauthbearer.assertion.claim.aud": (STRING, None),
    "sasl.oauthbearer.assertion.claim.exp.seconds": (INT, "300"),
    "sasl.oauthbearer.assertion.claim.iss": (STRING, None),
    "sasl.oauthbearer.assertion.claim.jti.include": (BOOLEAN, "false"),
    "sasl.oauthbearer.assertion.claim.nbf.seconds": (INT, "60"),
    "sasl.oauthbearer.assertion.claim.sub": (STRING, None),
    "sasl.oauthbearer.assertion.file": (STRING, None),
    "sasl.oauthbearer.assertion.private.key.file": (STRING, None),
    "sasl.oauthbearer.assertion.private.key.passphrase": (PASSWORD, None),
    "sasl.oauthbearer.assertion.template.file": (STRING, None),
    "sasl.oauthbearer.client.credentials.client.id": (STRING, None),
    "sasl.oauthbearer.client.credentials.client.secret": (PASSWORD, None),
    "sasl.oauthbearer.clock.skew.seconds": (INT, "30"),
    "sasl.oauthbearer.expected.audience": (LIST, None),
    "sasl.oauthbearer.expected.issuer": (STRING, None),
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": (LONG, "3600000"),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": (LONG, "10000"),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": (LONG, "100"),
    "sasl.oauthbearer.jwks.endpoint.url": (STRING, None),
    "sasl.oauthbearer.jwt.retriever.class": (
        CLASS,
        "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever",
    ),
    "sasl.oauthbearer.jwt.validator.class": (
        CLASS,
        "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
    ),
    "sasl.oauthbearer.scope": (STRING, None),
    "sasl.oauthbearer.scope.claim.name": (STRING, "scope"),
    "sasl.oauthbearer.sub.claim.name": (STRING, "sub"),
    "sasl.oauthbearer.token.endpoint.url": (STRING, None),
    "sasl.server.callback.handler.class": (CLASS, None),
    "sasl.server.max.receive.size": (INT, "524288"),
    "security.inter.broker.protocol": (STRING, "PLAINTEXT"),
    "security.providers": (STRING, None),
    "server.max.startup.time.ms": (LONG, "9223372036854775807"),
    "share.coordinator.append.linger.ms": (INT, "-1"),
    "share.coordinator.cold.partition.snapshot.interval.ms": (INT, "300000"),
    "share.coordinator.load.buffer.size": (INT, "5242880"),
    "share.coordinator.snapshot.update.records.per.snapshot": (INT, "500"),
    "share.coordinator.state.topic.compression.codec": (INT, "0"),
    "share.coordinator.state.topic.min.isr": (SHORT, "2"),
    "share.coordinator.state.topic.num.partitions": (INT, "50"),
    "share.coordinator.state.topic.prune.interval.ms": (INT, "300000"),
    "share.coordinator.state.topic.replication.factor": (SHORT, "3"),
    "share.coordinator.state.topic.segment.bytes": (INT, "104857600"),
    "share.coordinator.threads": (INT, "1"),
    "share.coordinator.write.timeout.ms": (INT, "5000"),
    "share.fetch.purgatory.purge.interval.requests": (INT, "1000"),
    "socket.connection.setup.timeout.max.ms": (LONG, "30000"),
    "socket.connection.setup.timeout.ms": (LONG, "10000"),
    "socket.listen.backlog.size": (INT, "50"),
    "socket.receive.buffer.bytes": (INT, "102400"),
    "socket.request.max.bytes": (INT, "104857600"),
    "socket.send.buffer.bytes": (INT, "102400"),
    "ssl.allow.dn.changes": (BOOLEAN, "false"),
    "ssl.allow.san.changes": (BOOLEAN, "false"),
    "ssl.cipher.suites": (LIST, ""),
    "ssl.client.auth": (STRING, "NONE"),
    "ssl.enabled.protocols": (LIST, "TLSv1.2,TLSv1.3"),
    "ssl.endpoint.identification.algorithm": (STRING, "https"),
    "ssl.engine.factory.class": (CLASS, None),
    "ssl.key.password": (PASSWORD, None),
    "ssl.keymanager.algorithm": (STRING, "SunX509"),
    "ssl.keystore.certificate.chain": (PASSWORD, None),
    "ssl.keystore.key": (PASSWORD, None),
    "ssl.keystore.location": (STRING, None),
    "ssl.keystore.password": (PASSWORD, None),
    "ssl.keystore.type": (STRING, "JKS"),
    "ssl.principal.mapping.rules": (STRING, "DEFAULT"),
    "ssl.protocol": (STRING, "TLSv1.3"),
    "ssl.provider": (STRING, None),
    "ssl.secure.random.implementation": (STRING, None),
    "ssl.trustmanager.algorithm": (STRING, "PKIX"),
    "ssl.truststore.certificates": (PASSWORD, None),
    "ssl.truststore.location": (STRING, None),
    "ssl.truststore.password": (PASSWORD, None),
    "ssl.truststore.type": (STRING, "JKS"),
    "telemetry.max.bytes": (INT, "1048576"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (INT, "10000"),
    "transaction.max.timeout.ms": (INT, "900000"),
    "transaction.partition.verification.enable": (BOOLEAN, "true"),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (INT, "3600000"),
    "transaction.state.log.load.buffer.size": (INT, "5242880"),
    "transaction.state.log.min.isr": (INT, "2"),
    "transaction.state.log.num.partitions": (INT, "50"),
    "transaction.state.log.replication.factor": (SHORT, "3"),
    "transaction.state.log.segment.bytes": (INT, "104857600"),
    "transaction.two.phase.commit.enable": (BOOLEAN, "false"),
    "transactional.id.expiration.ms": (INT, "604800000"),
    "unclean.leader.election.enable": (BOOLEAN, "false"),
    "unclean.leader.election.interval.ms": (LONG, "300000"),
}

KAFKA_BROKER_CONFIGS: dict[str, BrokerConfigDef] = {
    name: BrokerConfigDef(type_, default, _mode(name)) for name, (type_, default) in _ROWS.items()
}
del _ROWS

_LISTENER_PREFIX = "listener.name."


def listener_base_name(name: str) -> str | None:
    """The config a listener-prefixed name sets (``listener.name.<l>.<config>``
    or ``listener.name.<l>.<mechanism>.<config>`` for the mechanism configs),
    as Kafka's ListenerConfigRegex reads it; None for an unprefixed name."""
    if not name.startswith(_LISTENER_PREFIX):
        return None
    rest = name[len(_LISTENER_PREFIX) :]
    listener, dot, base = rest.partition(".")
    if not listener or not dot:
        return None
    mechanism, dot, config = base.partition(".")
    if dot and config in LISTENER_MECHANISM_CONFIGS:
        return config
    return base


def update_mode(name: str) -> str | None:
    """The update mode of a broker config name, listener-prefixed or not:
    a prefixed listener config is per-broker unless it is one of the
    cluster-level ones; None for a name Kafka does not know."""
    base = listener_base_name(name)
    if base is None:
        definition = KAFKA_BROKER_CONFIGS.get(name)
        return definition.mode if definition else None
    if base in CLUSTER_LEVEL_LISTENER_CONFIGS:
        return CLUSTER_WIDE
    if base in PER_BROKER_CONFIGS or base in LISTENER_MECHANISM_CONFIGS:
        return PER_BROKER
    definition = KAFKA_BROKER_CONFIGS.get(base)
    return READ_ONLY if definition else None
