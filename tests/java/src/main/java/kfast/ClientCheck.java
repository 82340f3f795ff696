package kfast;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.CreateDelegationTokenOptions;
import org.apache.kafka.clients.admin.DescribeDelegationTokenOptions;
import org.apache.kafka.clients.admin.ExpireDelegationTokenOptions;
import org.apache.kafka.clients.admin.RenewDelegationTokenOptions;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.apache.kafka.common.security.token.delegation.TokenInformation;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.utils.AppInfoParser;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Apache Kafka Java client against a broker, one scenario per run:
 *
 * <pre>
 *   java -cp build/java/classes:build/java/lib/* kfast.ClientCheck SCENARIO BOOTSTRAP TOPIC
 * </pre>
 *
 * SCENARIO is produce-consume, consumer-protocol, admin, transactions,
 * transaction-versions, telemetry, acls, quotas, delegation-tokens,
 * describe-tokens or token-login; TOPIC
 * is a fresh name that the scenario uses as a prefix. Every fact the test
 * checks is printed to stdout as one {@code key=value} line (a key may
 * repeat); the client's own log goes to stderr. Exit status 0 when the
 * scenario ran to its end; an exception (including a wait that timed out)
 * exits 1 with its stack trace.
 *
 * <p>The environment variable KFAST_CLIENT_PROPERTIES may name a properties
 * file (security.protocol, ssl.*, sasl.*) that every client of the run takes
 * over its own settings: the scenarios then run through a secured listener.
 */
public final class ClientCheck {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};

    private final String bootstrap;
    private final String topic;
    /** KFAST_CLIENT_PROPERTIES' settings, added to every client's. */
    private static final Properties SECURITY = new Properties();

    private ClientCheck(String bootstrap, String topic) {
        this.bootstrap = bootstrap;
        this.topic = topic;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: ClientCheck SCENARIO BOOTSTRAP TOPIC");
            System.exit(2);
        }
        String securityFile = System.getenv("KFAST_CLIENT_PROPERTIES");
        if (securityFile != null) {
            try (java.io.Reader reader = java.nio.file.Files.newBufferedReader(
                    java.nio.file.Path.of(securityFile))) {
                SECURITY.load(reader);
            }
        }
        ClientCheck check = new ClientCheck(args[1], args[2]);
        emit("client_version", AppInfoParser.getVersion());
        switch (args[0]) {
            case "produce-consume" -> check.produceConsume();
            case "consumer-protocol" -> check.consumerProtocol();
            case "admin" -> check.admin();
            case "transactions" -> check.transactions();
            case "transaction-versions" -> check.transactionVersions();
            case "telemetry" -> check.telemetry();
            case "acls" -> check.acls();
            case "quotas" -> check.quotas();
            case "delegation-tokens" -> check.delegationTokens();
            case "describe-tokens" -> check.describeTokens();
            case "token-login" -> check.tokenLogin();
            default -> {
                System.err.println("unknown scenario " + args[0]);
                System.exit(2);
            }
        }
        emit("done", args[0]);
    }

    // -- scenarios ---------------------------------------------------------------------

    /**
     * An idempotent producer (acks=all) per codec, then a classic-protocol group
     * consumer that reads everything back, commits, and a second consumer of the
     * same group that sees the committed offsets.
     */
    private void produceConsume() throws Exception {
        try (Admin admin = newAdmin()) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
        }
        for (String codec : CODECS) {
            Properties props = producerProps();
            props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
            props.put(ProducerConfig.LINGER_MS_CONFIG, 5);
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (int i = 0; i < 10; i++) {
                    sent.add(producer.send(new ProducerRecord<>(topic, codec + "-" + (i % 3),
                                                                codec + "-" + i)));
                }
                producer.flush();
                for (Future<RecordMetadata> future : sent) {
                    future.get();
                }
                emit("produced", codec + " " + sent.size());
            }
        }

        String group = topic + "-group";
        Properties props = consumerProps(group, "classic");
        Map<TopicPartition, OffsetAndMetadata> committed;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> records = pollUntil(consumer, 50);
            for (ConsumerRecord<String, String> record : records) {
                emit("record", record.partition() + ":" + record.offset() + ":" + record.key()
                               + ":" + record.value());
            }
            emit("assignment", partitions(consumer.assignment()));
            emit("member_id_set", !consumer.groupMetadata().memberId().isEmpty());
            emit("generation", consumer.groupMetadata().generationId());
            consumer.commitSync();
            committed = consumer.committed(consumer.assignment());
            emit("committed", offsets(committed));
            // An explicit commit with metadata, read back through the same group.
            TopicPartition first = new TopicPartition(topic, 0);
            consumer.commitSync(Map.of(first, new OffsetAndMetadata(1, "kfast-meta")));
            OffsetAndMetadata explicit = consumer.committed(Set.of(first)).get(first);
            emit("explicit_commit", explicit.offset() + ":" + explicit.metadata());
            consumer.commitSync(Map.of(first, committed.get(first)));
        }
        // A new member of the group starts from the committed offsets: nothing left.
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            Set<TopicPartition> all = Set.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
            emit("committed_after_close", offsets(consumer.committed(all)));
            consumer.subscribe(List.of(topic));
            long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
            int again = 0;
            while (consumer.assignment().size() < 2 && System.nanoTime() < deadline) {
                again += consumer.poll(Duration.ofMillis(100)).count();
            }
            again += consumer.poll(Duration.ofMillis(500)).count();
            emit("second_member_assignment", partitions(consumer.assignment()));
            emit("second_member_records", again);
        }
    }

    /**
     * Two consumers of one group on the KIP-848 protocol (group.protocol=consumer,
     * ConsumerGroupHeartbeat): the broker's assignor splits four partitions
     * between them, and together they read every record.
     */
    private void consumerProtocol() throws Exception {
        int partitions = 4;
        int perPartition = 10;
        try (Admin admin = newAdmin()) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
        }
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps())) {
            for (int p = 0; p < partitions; p++) {
                for (int i = 0; i < perPartition; i++) {
                    producer.send(new ProducerRecord<>(topic, p, "k" + i, p + "-" + i));
                }
            }
            producer.flush();
        }
        String group = topic + "-group";
        // The group's own configs (GROUP config resource, KIP-848):
        // describe the defaults, set two, describe them back.
        emit("group_id", group);
        try (Admin admin = newAdmin()) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            emitConfigs(admin, resource, "group_config", "consumer.session.timeout.ms",
                        "consumer.heartbeat.interval.ms");
            admin.incrementalAlterConfigs(Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("consumer.session.timeout.ms", "50000"),
                                  AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("consumer.heartbeat.interval.ms", "400"),
                                  AlterConfigOp.OpType.SET)))).all().get();
            emitConfigs(admin, resource, "group_config_altered", "consumer.session.timeout.ms",
                        "consumer.heartbeat.interval.ms");
        }
        Set<String> seen = ConcurrentHashMap.newKeySet();
        Map<Integer, Set<TopicPartition>> assignments = new ConcurrentHashMap<>();
        Map<Integer, String> memberIds = new ConcurrentHashMap<>();
        Map<Integer, Integer> epochs = new ConcurrentHashMap<>();
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> members = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        for (int m = 0; m < 2; m++) {
            int member = m;
            Thread thread = new Thread(() -> {
                try (KafkaConsumer<String, String> consumer =
                             new KafkaConsumer<>(consumerProps(group, "consumer"))) {
                    consumer.subscribe(List.of(topic));
                    while (!stop.get()) {
                        for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(100))) {
                            seen.add(record.value());
                        }
                        assignments.put(member, new HashSet<>(consumer.assignment()));
                        memberIds.put(member, consumer.groupMetadata().memberId());
                        epochs.put(member, consumer.groupMetadata().generationId());
                    }
                    consumer.commitSync();
                } catch (Throwable e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                }
            }, "member-" + m);
            thread.start();
            members.add(thread);
            if (m == 0) {
                // The second member joins a group that already has an assignment.
                waitFor("the first member's assignment",
                        () -> assignments.getOrDefault(0, Set.of()).size() == partitions
                              || !failures.isEmpty());
            }
        }
        try {
            waitFor("every record and a balanced assignment", () -> {
                Set<TopicPartition> a = assignments.getOrDefault(0, Set.of());
                Set<TopicPartition> b = assignments.getOrDefault(1, Set.of());
                Set<TopicPartition> union = new HashSet<>(a);
                union.addAll(b);
                return !failures.isEmpty() || (seen.size() == partitions * perPartition
                        && a.size() == 2 && b.size() == 2 && union.size() == partitions);
            });
            try (Admin admin = newAdmin()) {
                ConsumerGroupDescription description =
                        admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                emit("group_type", description.type());
                emit("group_state", description.groupState());
                emit("group_members", description.members().size());
                emit("group_assignor", description.partitionAssignor());
            }
        } finally {
            stop.set(true);
            for (Thread thread : members) {
                thread.join(WAIT.toMillis());
            }
        }
        if (!failures.isEmpty()) {
            throw new RuntimeException("a group member failed", failures.get(0));
        }
        emit("records_seen", seen.size());
        for (int m = 0; m < 2; m++) {
            emit("assignment." + m, partitions(assignments.get(m)));
            emit("member_id_set." + m, !memberIds.get(m).isEmpty());
            emit("member_epoch." + m, epochs.get(m));
        }
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(group, "consumer"))) {
            Set<TopicPartition> all = new HashSet<>();
            for (int p = 0; p < partitions; p++) {
                all.add(new TopicPartition(topic, p));
            }
            emit("committed", offsets(consumer.committed(all)));
        }

        // A broker-side regular expression (SubscriptionPattern, RE2J syntax): the
        // assignment names topic ids the consumer resolves through Metadata.
        try (KafkaConsumer<String, String> consumer =
                     new KafkaConsumer<>(consumerProps(topic + "-pattern-group", "consumer"))) {
            consumer.subscribe(new SubscriptionPattern(topic.replace(".", "\\.") + "|no-such-topic"));
            List<ConsumerRecord<String, String>> records = pollUntil(consumer, partitions * perPartition);
            emit("pattern_records", records.size());
            emit("pattern_assignment", partitions(consumer.assignment()));
        }
    }

    /** Topics, configs, the cluster and groups through the Admin client. */
    @SuppressWarnings("removal")  // listConsumerGroups: what applications still call
    private void admin() throws Exception {
        try (Admin admin = newAdmin()) {
            DescribeClusterResult cluster = admin.describeCluster();
            emit("cluster_id_set", cluster.clusterId().get() != null && !cluster.clusterId().get().isEmpty());
            for (Node node : cluster.nodes().get()) {
                emit("node", node.id() + " " + node.host() + ":" + node.port());
            }
            emit("controller", cluster.controller().get().id());

            NewTopic newTopic = new NewTopic(topic, 3, (short) 1)
                    .configs(Map.of("cleanup.policy", "compact", "segment.bytes", "1048576"));
            admin.createTopics(List.of(newTopic)).all().get();
            emit("created", topic);
            emit("create_again", failureOf(() -> admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1)))
                                                       .all().get()));
            emit("listed", admin.listTopics().names().get().contains(topic));
            TopicDescription description = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            emit("partitions", description.partitions().size());
            emit("leaders", description.partitions().stream()
                    .map(p -> String.valueOf(p.leader().id())).collect(Collectors.joining(",")));
            emit("replicas", description.partitions().stream()
                    .map(p -> String.valueOf(p.replicas().size())).collect(Collectors.joining(",")));
            emit("topic_id_set", description.topicId() != null && description.topicId().getMostSignificantBits() != 0);
            emit("described_by_id", admin.describeTopics(TopicCollection.ofTopicIds(List.of(description.topicId())))
                    .allTopicIds().get().get(description.topicId()).name());

            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            emitConfigs(admin, resource, "config", "cleanup.policy", "segment.bytes", "retention.ms");
            Map<ConfigResource, Collection<AlterConfigOp>> ops = Map.of(resource, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "3600000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", ""), AlterConfigOp.OpType.DELETE)));
            admin.incrementalAlterConfigs(ops).all().get();
            emitConfigs(admin, resource, "altered", "cleanup.policy", "segment.bytes", "retention.ms");
            emit("alter_unknown_config", failureOf(() -> admin.incrementalAlterConfigs(Map.of(resource, List.of(
                    new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET))))
                    .all().get()));

            // Every Kafka 4.2 broker config, read-only where kfast does not update it.
            ConfigResource brokerResource = new ConfigResource(ConfigResource.Type.BROKER,
                    String.valueOf(cluster.controller().get().id()));
            Config brokerConfig = admin.describeConfigs(List.of(brokerResource)).all().get().get(brokerResource);
            emit("broker_config_count", brokerConfig.entries().size());
            for (String name : List.of("remote.log.manager.task.interval.ms", "sasl.kerberos.min.time.before.relogin",
                    "log.retention.hours")) {
                ConfigEntry entry = brokerConfig.get(name);
                emit("broker_config." + name, entry == null ? "missing"
                        : entry.value() + " " + entry.source() + " " + entry.isReadOnly() + " " + entry.type());
            }
            try {
                admin.incrementalAlterConfigs(Map.of(brokerResource, List.of(new AlterConfigOp(
                        new ConfigEntry("log.retention.hours", "1"), AlterConfigOp.OpType.SET)))).all().get();
                emit("alter_read_only_broker_config", "none");
            } catch (ExecutionException e) {
                emit("alter_read_only_broker_config",
                        e.getCause().getClass().getSimpleName() + " " + e.getCause().getMessage());
            }

            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all().get();
            emit("partitions_after_increase",
                 admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size());

            // ListOffsets by spec, then DeleteRecords moves the log start.
            TopicPartition first = new TopicPartition(topic, 0);
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps())) {
                for (int i = 0; i < 5; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, 1000L + 10 * i, "k", "v" + i)).get();
                }
            }
            emit("offset.earliest", offsetFor(admin, first, OffsetSpec.earliest()));
            emit("offset.latest", offsetFor(admin, first, OffsetSpec.latest()));
            emit("offset.max_timestamp", offsetFor(admin, first, OffsetSpec.maxTimestamp()));
            emit("offset.for_timestamp_1015", offsetFor(admin, first, OffsetSpec.forTimestamp(1015)));
            emit("low_watermark", admin.deleteRecords(Map.of(first, RecordsToDelete.beforeOffset(2)))
                    .lowWatermarks().get(first).get().lowWatermark());
            emit("offset.earliest_after_delete", offsetFor(admin, first, OffsetSpec.earliest()));

            // A live classic-protocol member, seen through the group APIs.
            String group = topic + "-group";
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(group, "classic"))) {
                consumer.subscribe(List.of(topic));
                long deadline = System.nanoTime() + WAIT.toNanos();
                while (consumer.assignment().isEmpty() && System.nanoTime() < deadline) {
                    consumer.poll(Duration.ofMillis(100));
                }
                consumer.commitSync(Map.of(new TopicPartition(topic, 1), new OffsetAndMetadata(0)));
                Collection<GroupListing> groups = admin.listGroups().all().get();
                emit("listed_group", groups.stream().anyMatch(g -> g.groupId().equals(group)));
                emit("listed_consumer_group",
                     admin.listConsumerGroups().all().get().stream().anyMatch(g -> g.groupId().equals(group)));
                ConsumerGroupDescription live = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                emit("group_type", live.type());
                emit("group_state", live.groupState());
                emit("group_protocol", live.partitionAssignor());
                emit("group_members", live.members().size());
                emit("group_member_partitions",
                     live.members().stream().mapToInt(m -> m.assignment().topicPartitions().size()).sum());
                emit("group_coordinator", live.coordinator().id());
            }
            emit("group_offsets", offsets(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()));
            admin.alterConsumerGroupOffsets(group, Map.of(first, new OffsetAndMetadata(3))).all().get();
            emit("group_offsets_altered",
                 offsets(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()));
            emit("group_state_after_close", admin.describeConsumerGroups(List.of(group)).all().get()
                    .get(group).groupState());
            admin.deleteConsumerGroups(List.of(group)).all().get();
            emit("group_deleted", admin.listConsumerGroups().all().get().stream()
                    .noneMatch(g -> g.groupId().equals(group)));

            admin.deleteTopics(List.of(topic)).all().get();
            waitFor("the deleted topic to leave the listing",
                    () -> !get(() -> admin.listTopics().names().get()).contains(topic));
            emit("deleted", true);
            emit("describe_deleted", failureOf(() -> admin.describeTopics(List.of(topic)).allTopicNames().get()));
        }
    }

    /**
     * A transactional producer that commits, aborts and commits; read_committed
     * and read_uncommitted reads of the result; a consume-transform-produce step
     * with sendOffsetsToTransaction (committed, then one aborted); fencing by a
     * new producer with the same transactional.id.
     */
    private void transactions() throws Exception {
        String input = topic + "-in";
        String output = topic + "-out";
        try (Admin admin = newAdmin()) {
            admin.createTopics(List.of(new NewTopic(input, 1, (short) 1), new NewTopic(output, 1, (short) 1)))
                    .all().get();
        }
        TopicPartition in0 = new TopicPartition(input, 0);
        TopicPartition out0 = new TopicPartition(output, 0);
        String transactionalId = topic + "-tx";
        try (Admin admin = newAdmin()) {
            emitTransactionVersion(admin);
        }
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(transactionalProps(transactionalId));
             Admin admin = newAdmin()) {
            producer.initTransactions();
            emitEpoch(admin, transactionalId, "init");
            sendInTransaction(producer, input, "c1", 5, true);
            emitEpoch(admin, transactionalId, "c1");
            sendInTransaction(producer, input, "a", 5, false);
            emitEpoch(admin, transactionalId, "a");
            sendInTransaction(producer, input, "c2", 5, true);
            emitEpoch(admin, transactionalId, "c2");
            // The epoch the partition holds for the producer: its last marker's.
            long producerId = admin.describeTransactions(List.of(transactionalId)).all().get()
                    .get(transactionalId).producerId();
            emit("partition_producer_epoch", admin.describeProducers(List.of(in0)).partitionResult(in0).get()
                    .activeProducers().stream().filter(state -> state.producerId() == producerId)
                    .map(state -> String.valueOf(state.producerEpoch())).collect(Collectors.joining(",")));

            // A second producer with the same transactional.id fences the first.
            try (KafkaProducer<String, String> successor =
                         new KafkaProducer<>(transactionalProps(transactionalId))) {
                successor.initTransactions();
                emit("fenced", failureOf(() -> {
                    producer.beginTransaction();
                    producer.send(new ProducerRecord<>(input, "zombie")).get();
                    producer.commitTransaction();
                    return null;
                }));
                // Transaction version 2: the zombie's write failed as
                // INVALID_PRODUCER_EPOCH (abortable); ending it is fenced.
                emit("fenced_abort", failureOf(() -> {
                    producer.abortTransaction();
                    return null;
                }));
            }
        }
        emit("committed_read", String.join(",", values(readAll(in0, "read_committed"))));
        emit("uncommitted_read", String.join(",", values(readAll(in0, "read_uncommitted"))));
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(null, "classic"))) {
            emit("end_offset", consumer.endOffsets(List.of(in0)).get(in0));
        }

        // Consume-transform-produce: the output and the input offsets in one transaction.
        String group = topic + "-ctp";
        Properties consumerProps = consumerProps(group, "classic");
        consumerProps.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps);
             KafkaProducer<String, String> producer = new KafkaProducer<>(transactionalProps(topic + "-ctp-tx"))) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            List<ConsumerRecord<String, String>> records = pollUntil(consumer, 10);
            producer.beginTransaction();
            for (ConsumerRecord<String, String> record : records) {
                producer.send(new ProducerRecord<>(output, record.key(), record.value().toUpperCase()));
            }
            Map<TopicPartition, OffsetAndMetadata> positions = Map.of(in0, new OffsetAndMetadata(consumer.position(in0)));
            producer.sendOffsetsToTransaction(positions, consumer.groupMetadata());
            producer.commitTransaction();
            emit("ctp_position", consumer.position(in0));
            emit("ctp_committed", offsets(consumer.committed(Set.of(in0))));

            // An aborted step leaves neither its output nor its offsets.
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(output, "aborted-output"));
            producer.sendOffsetsToTransaction(Map.of(in0, new OffsetAndMetadata(0)), consumer.groupMetadata());
            producer.abortTransaction();
            emit("ctp_committed_after_abort", offsets(consumer.committed(Set.of(in0))));
        }
        emit("output_read", String.join(",", values(readAll(out0, "read_committed"))));
        try (Admin admin = newAdmin()) {
            emit("ctp_group_offsets", offsets(admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get()));
        }

        // An open transaction: read_committed stops at the last stable offset,
        // and the transaction APIs see it.
        String openId = topic + "-open-tx";
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(transactionalProps(openId))) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(input, "open", "open-0")).get();
            for (String isolation : List.of("read_committed", "read_uncommitted")) {
                Properties props = consumerProps(null, "classic");
                props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
                try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
                    emit("open_end_offset." + isolation, consumer.endOffsets(List.of(in0)).get(in0));
                }
            }
            try (Admin admin = newAdmin()) {
                TransactionDescription description =
                        admin.describeTransactions(List.of(openId)).all().get().get(openId);
                emit("open_state", description.state());
                emit("open_partitions", description.topicPartitions());
                emit("open_listed", admin.listTransactions(new ListTransactionsOptions()
                                .filterStates(List.of(TransactionState.ONGOING))).all().get().stream()
                        .anyMatch(listing -> listing.transactionalId().equals(openId)));
                emit("open_start_offset", admin.describeProducers(List.of(in0)).partitionResult(in0).get()
                        .activeProducers().stream()
                        .filter(state -> state.currentTransactionStartOffset().isPresent())
                        .map(state -> String.valueOf(state.currentTransactionStartOffset().getAsLong()))
                        .collect(Collectors.joining(",")));
            }
            producer.abortTransaction();
        }
    }

    /**
     * transaction.version moved with Admin.updateFeatures: lowered to 0 (a
     * safe downgrade), a new producer runs the original protocol (its epoch
     * stays across transactions); raised back to 2, a new producer bumps the
     * epoch at every transaction end. Each phase commits one transaction
     * with offsets and aborts one; read_committed sees the commits only.
     */
    private void transactionVersions() throws Exception {
        String input = topic + "-in";
        String group = topic + "-g";
        TopicPartition in0 = new TopicPartition(input, 0);
        try (Admin admin = newAdmin()) {
            admin.createTopics(List.of(new NewTopic(input, 1, (short) 1))).all().get();
            emit("lower_as_upgrade", failureOf(() -> admin.updateFeatures(
                    Map.of("transaction.version", new FeatureUpdate((short) 1, FeatureUpdate.UpgradeType.UPGRADE)),
                    new UpdateFeaturesOptions()).all().get()));
            for (short level : new short[] {0, 2}) {
                FeatureUpdate.UpgradeType type = level == 0
                        ? FeatureUpdate.UpgradeType.SAFE_DOWNGRADE : FeatureUpdate.UpgradeType.UPGRADE;
                admin.updateFeatures(Map.of("transaction.version", new FeatureUpdate(level, type)),
                        new UpdateFeaturesOptions()).all().get();
                waitFor("transaction.version " + level, () -> finalizedTransactionVersion(admin) == level);
                emitTransactionVersion(admin);
                String transactionalId = topic + "-tv" + level;
                try (KafkaProducer<String, String> producer = new KafkaProducer<>(transactionalProps(transactionalId))) {
                    producer.initTransactions();
                    emitEpoch(admin, transactionalId, "tv" + level + ".init");
                    producer.beginTransaction();
                    producer.send(new ProducerRecord<>(input, "tv" + level, "tv" + level + "-commit")).get();
                    producer.sendOffsetsToTransaction(Map.of(in0, new OffsetAndMetadata(level + 1)),
                            new org.apache.kafka.clients.consumer.ConsumerGroupMetadata(group));
                    producer.commitTransaction();
                    emitEpoch(admin, transactionalId, "tv" + level + ".commit");
                    producer.beginTransaction();
                    producer.send(new ProducerRecord<>(input, "tv" + level, "tv" + level + "-abort")).get();
                    producer.sendOffsetsToTransaction(Map.of(in0, new OffsetAndMetadata(100)),
                            new org.apache.kafka.clients.consumer.ConsumerGroupMetadata(group));
                    producer.abortTransaction();
                    emitEpoch(admin, transactionalId, "tv" + level + ".abort");
                }
                emit("group_offsets.tv" + level, offsets(admin.listConsumerGroupOffsets(group)
                        .partitionsToOffsetAndMetadata().get()));
            }
        }
        emit("committed_read", String.join(",", values(readAll(in0, "read_committed"))));
    }

    private static short finalizedTransactionVersion(Admin admin) {
        try {
            FeatureMetadata features = admin.describeFeatures().featureMetadata().get();
            var level = features.finalizedFeatures().get("transaction.version");
            return level == null ? 0 : level.maxVersionLevel();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /** The finalized and supported transaction.version levels (DescribeFeatures). */
    /**
     * Admin createAcls / describeAcls / deleteAcls against a broker with an
     * authorizer: a LITERAL READ for User:alice on the topic and a PREFIXED
     * DENY WRITE for User:* on the topic's name as prefix, listed, matched by
     * a MATCH filter, one deleted by a filter.
     */
    /** AlterClientQuotas / DescribeClientQuotas through the Java admin client. */
    private void quotas() throws Exception {
        try (Admin admin = newAdmin()) {
            Map<String, String> userClient = new java.util.HashMap<>();
            userClient.put(ClientQuotaEntity.USER, "alice");
            userClient.put(ClientQuotaEntity.CLIENT_ID, null);     // the default client id
            ClientQuotaEntity aliceDefault = new ClientQuotaEntity(userClient);
            ClientQuotaEntity app = new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, topic));
            admin.alterClientQuotas(List.of(
                    new ClientQuotaAlteration(aliceDefault, List.of(
                            new ClientQuotaAlteration.Op("producer_byte_rate", 1024.0),
                            new ClientQuotaAlteration.Op("request_percentage", 25.5))),
                    new ClientQuotaAlteration(app, List.of(
                            new ClientQuotaAlteration.Op("consumer_byte_rate", 2048.0))))).all().get();
            Map<ClientQuotaEntity, Map<String, Double>> all =
                    admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get();
            for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e : all.entrySet()) {
                emit("quota", new TreeMap<>(e.getKey().entries()) + " " + new TreeMap<>(e.getValue()));
            }
            emit("alice_only", admin.describeClientQuotas(ClientQuotaFilter.containsOnly(List.of(
                    ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, "alice"))))
                    .entities().get().size());
            try {
                admin.alterClientQuotas(List.of(new ClientQuotaAlteration(app, List.of(
                        new ClientQuotaAlteration.Op("producer_byte_rate", 1.5))))).all().get();
            } catch (ExecutionException e) {
                emit("fractional", e.getCause().getClass().getSimpleName() + ": "
                        + e.getCause().getMessage());
            }
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(app, List.of(
                    new ClientQuotaAlteration.Op("consumer_byte_rate", null))))).all().get();
            emit("after_remove", admin.describeClientQuotas(ClientQuotaFilter.all())
                    .entities().get().size());
        }
    }

    private void acls() throws Exception {
        try (Admin admin = newAdmin()) {
            AclBinding read = new AclBinding(
                    new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                    new AccessControlEntry("User:alice", "*", AclOperation.READ,
                                           AclPermissionType.ALLOW));
            AclBinding deny = new AclBinding(
                    new ResourcePattern(ResourceType.TOPIC, topic, PatternType.PREFIXED),
                    new AccessControlEntry("User:*", "*", AclOperation.WRITE,
                                           AclPermissionType.DENY));
            admin.createAcls(List.of(read, deny)).all().get();
            for (AclBinding binding : admin.describeAcls(AclBindingFilter.ANY).values().get()) {
                emit("acl", binding.pattern().resourceType() + " " + binding.pattern().name() + " "
                        + binding.pattern().patternType() + " " + binding.entry().principal() + " "
                        + binding.entry().operation() + " " + binding.entry().permissionType());
            }
            AclBindingFilter match = new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.TOPIC, topic + "-x", PatternType.MATCH),
                    AccessControlEntryFilter.ANY);
            emit("matched", admin.describeAcls(match).values().get().size());
            AclBindingFilter denies = new AclBindingFilter(ResourcePatternFilter.ANY,
                    new AccessControlEntryFilter(null, null, AclOperation.ANY,
                                                 AclPermissionType.DENY));
            emit("deleted", admin.deleteAcls(List.of(denies)).all().get().size());
            emit("left", admin.describeAcls(AclBindingFilter.ANY).values().get().size());
            try {
                admin.createAcls(List.of(new AclBinding(
                        new ResourcePattern(ResourceType.CLUSTER, "not-the-cluster",
                                            PatternType.LITERAL),
                        new AccessControlEntry("User:alice", "*", AclOperation.ALTER,
                                               AclPermissionType.ALLOW)))).all().get();
                emit("bad_cluster_name", "accepted");
            } catch (ExecutionException e) {
                emit("bad_cluster_name", e.getCause().getClass().getSimpleName());
            }
        }
    }

    private static void emitTransactionVersion(Admin admin) throws Exception {
        FeatureMetadata features = admin.describeFeatures().featureMetadata().get();
        var finalized = features.finalizedFeatures().get("transaction.version");
        emit("finalized_transaction_version", finalized == null ? "none" : finalized.maxVersionLevel());
        var supported = features.supportedFeatures().get("transaction.version");
        emit("supported_transaction_version",
                supported == null ? "none" : supported.minVersion() + "-" + supported.maxVersion());
    }

    /** The coordinator's producer id epoch for a transactional id (DescribeTransactions). */
    private static void emitEpoch(Admin admin, String transactionalId, String label) throws Exception {
        TransactionDescription description =
                admin.describeTransactions(List.of(transactionalId)).all().get().get(transactionalId);
        emit("epoch." + label, description.producerEpoch() + " " + description.state());
    }

    // -- clients -----------------------------------------------------------------------

    /**
     * KIP-714: a CLIENT_METRICS subscription for Java clients' producer
     * metrics (every 1000 ms), then a producer that learns its client
     * instance id from GetTelemetrySubscriptions and stays open, pushing,
     * until a line on standard input says the test has seen its metrics.
     */
    private void telemetry() throws Exception {
        try (Admin admin = newAdmin()) {
            ConfigResource subscription = new ConfigResource(ConfigResource.Type.CLIENT_METRICS,
                    "java-" + topic);
            admin.incrementalAlterConfigs(Map.of(subscription, List.of(
                    new AlterConfigOp(new ConfigEntry("metrics", "org.apache.kafka.producer."),
                            AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("interval.ms", "1000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("match", "client_software_name=apache-kafka-java"),
                            AlterConfigOp.OpType.SET)))).all().get();
            emit("subscribed", subscription.name());
        }
        Properties props = producerProps();
        props.put(ProducerConfig.ENABLE_METRICS_PUSH_CONFIG, true);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "java-telemetry");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(topic, "v" + i)).get();
            }
            emit("client_instance_id", producer.clientInstanceId(Duration.ofSeconds(30)));
            new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
        }
        emit("closed", true);
    }

    /**
     * Delegation tokens through the Admin client, logged in (KFAST_CLIENT_PROPERTIES)
     * as the owner; the users bob (a renewer) and carol (not one) log in with the
     * password in KFAST_SCRAM_PASSWORD. A token is created, described, renewed by
     * bob, refused to carol, then expired; a second token ("kept") stays for the
     * restart check (describe-tokens).
     */
    void delegationTokens() throws Exception {
        String password = System.getenv("KFAST_SCRAM_PASSWORD");
        KafkaPrincipal bob = new KafkaPrincipal(KafkaPrincipal.USER_TYPE, "bob");
        try (Admin admin = newAdmin();
             Admin bobAdmin = newAdmin(scramLogin("bob", password, false));
             Admin carolAdmin = newAdmin(scramLogin("carol", password, false))) {
            DelegationToken token = admin.createDelegationToken(new CreateDelegationTokenOptions()
                    .renewers(List.of(bob)).maxLifetimeMs(2 * 24 * 3600 * 1000L)).delegationToken().get();
            TokenInformation info = token.tokenInfo();
            emit("owner", info.owner());
            emit("requester", info.tokenRequester());
            emit("renewers", info.renewers());
            emit("max_minus_issue", info.maxTimestamp() - info.issueTimestamp());
            emit("expiry_minus_issue", info.expiryTimestamp() - info.issueTimestamp());
            emit("token_id", info.tokenId());
            emit("hmac", java.util.Base64.getEncoder().encodeToString(token.hmac()));

            List<DelegationToken> described = admin.describeDelegationToken().delegationTokens().get();
            for (DelegationToken d : described) {
                emit("described", d.tokenInfo().tokenId() + " " + d.tokenInfo().owner() + " "
                        + java.util.Base64.getEncoder().encodeToString(d.hmac()));
            }
            emit("described_by_carol", carolAdmin.describeDelegationToken().delegationTokens().get().size());
            emit("described_for_bob", admin.describeDelegationToken(new DescribeDelegationTokenOptions()
                    .owners(List.of(bob))).delegationTokens().get().size());

            long renewed = bobAdmin.renewDelegationToken(token.hmac(),
                    new RenewDelegationTokenOptions().renewTimePeriodMs(60_000)).expiryTimestamp().get();
            emit("renewed_minus_issue_le_day", renewed - info.issueTimestamp() <= 24 * 3600 * 1000L);
            long describedExpiry = admin.describeDelegationToken().delegationTokens().get().stream()
                    .filter(d -> d.tokenInfo().tokenId().equals(info.tokenId()))
                    .findFirst().orElseThrow().tokenInfo().expiryTimestamp();
            emit("renewed_is_described", renewed == describedExpiry);
            emit("carol_renews", failureOf(() -> carolAdmin.renewDelegationToken(token.hmac())
                    .expiryTimestamp().get()));
            emit("unknown_hmac", failureOf(() -> admin.renewDelegationToken(new byte[64])
                    .expiryTimestamp().get()));
            emit("group_renewer", failureOf(() -> admin.createDelegationToken(new CreateDelegationTokenOptions()
                    .renewers(List.of(new KafkaPrincipal("Group", "g")))).delegationToken().get()));
            emit("for_other_owner", failureOf(() -> carolAdmin.createDelegationToken(
                    new CreateDelegationTokenOptions().owner(bob)).delegationToken().get()));

            DelegationToken kept = admin.createDelegationToken().delegationToken().get();
            emit("kept", kept.tokenInfo().tokenId());

            long expired = admin.expireDelegationToken(token.hmac(),
                    new ExpireDelegationTokenOptions().expiryTimePeriodMs(-1)).expiryTimestamp().get();
            emit("expired_le_now", expired <= System.currentTimeMillis());
            emit("after_expire", admin.describeDelegationToken().delegationTokens().get().stream()
                    .map(d -> d.tokenInfo().tokenId()).collect(Collectors.joining(",")));
            emit("renew_expired", failureOf(() -> admin.renewDelegationToken(token.hmac())
                    .expiryTimestamp().get()));
        }
    }

    /**
     * A producer logs in with a delegation token (ScramLoginModule tokenauth="true")
     * and produces; that session may not create tokens; once the owner expired the
     * token a new login with it is refused.
     */
    void tokenLogin() throws Exception {
        try (Admin admin = newAdmin()) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            DelegationToken token = admin.createDelegationToken().delegationToken().get();
            Properties login = scramLogin(token.tokenInfo().tokenId(),
                    java.util.Base64.getEncoder().encodeToString(token.hmac()), true);
            Properties props = producerProps();
            props.putAll(login);
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
                RecordMetadata sent = producer.send(new ProducerRecord<>(topic, "k", "by-token")).get();
                emit("token_produced", sent.offset());
            }
            try (Admin tokenAdmin = newAdmin(login)) {
                emit("token_session_creates", failureOf(() -> tokenAdmin.createDelegationToken()
                        .delegationToken().get()));
                emit("token_session_describes", failureOf(() -> tokenAdmin.describeDelegationToken()
                        .delegationTokens().get()));
            }
            admin.expireDelegationToken(token.hmac(), new ExpireDelegationTokenOptions()
                    .expiryTimePeriodMs(-1)).expiryTimestamp().get();
            props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 5000);
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
                emit("after_expire", failureOf(() -> producer.send(
                        new ProducerRecord<>(topic, "k", "refused")).get()));
            }
        }
    }

    /** Every token the owner (KFAST_CLIENT_PROPERTIES' login) sees. */
    void describeTokens() throws Exception {
        try (Admin admin = newAdmin()) {
            for (DelegationToken d : admin.describeDelegationToken().delegationTokens().get()) {
                emit("described", d.tokenInfo().tokenId() + " " + d.tokenInfo().owner());
            }
        }
    }

    /** SECURITY with another SCRAM login (a delegation token's when tokenAuth). */
    private static Properties scramLogin(String username, String password, boolean tokenAuth) {
        Properties props = new Properties();
        props.putAll(SECURITY);
        props.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required "
                + "username=\"" + username + "\" password=\"" + password + "\""
                + (tokenAuth ? " tokenauth=\"true\"" : "") + ";");
        return props;
    }

    private Admin newAdmin(Properties security) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("request.timeout.ms", 15000);
        props.put("default.api.timeout.ms", 30000);
        props.putAll(security);
        return Admin.create(props);
    }

    private Admin newAdmin() {
        return newAdmin(SECURITY);
    }

    private Properties producerProps() {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30000);
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.putAll(SECURITY);
        return props;
    }

    private Properties transactionalProps(String transactionalId) {
        Properties props = producerProps();
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 30000);
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30000);
        return props;
    }

    /** A consumer; group null: no group (assign only). */
    private Properties consumerProps(String group, String protocol) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        }
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.putAll(SECURITY);
        return props;
    }

    private void sendInTransaction(KafkaProducer<String, String> producer, String to, String prefix,
                                   int count, boolean commit) throws Exception {
        producer.beginTransaction();
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            sent.add(producer.send(new ProducerRecord<>(to, prefix, prefix + "-" + i)));
        }
        producer.flush();
        for (Future<RecordMetadata> future : sent) {
            future.get();
        }
        if (commit) {
            producer.commitTransaction();
        } else {
            producer.abortTransaction();
        }
        emit(commit ? "transaction_committed" : "transaction_aborted", prefix + " " + count);
    }

    /** Everything in one partition up to its end offset, at an isolation level. */
    private List<ConsumerRecord<String, String>> readAll(TopicPartition partition, String isolation) {
        Properties props = consumerProps(null, "classic");
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        List<ConsumerRecord<String, String>> records = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long end = consumer.endOffsets(List.of(partition)).get(partition);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (consumer.position(partition) < end) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException(isolation + " read of " + partition + " stopped at "
                            + consumer.position(partition) + " of " + end);
                }
                consumer.poll(Duration.ofMillis(100)).forEach(records::add);
            }
        }
        return records;
    }

    private static List<ConsumerRecord<String, String>> pollUntil(KafkaConsumer<String, String> consumer,
                                                                 int count) {
        List<ConsumerRecord<String, String>> records = new ArrayList<>();
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (records.size() < count) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("polled " + records.size() + " of " + count + " records");
            }
            consumer.poll(Duration.ofMillis(100)).forEach(records::add);
        }
        return records;
    }

    // -- output ------------------------------------------------------------------------

    private static void emit(String key, Object value) {
        System.out.println(key + "=" + value);
        System.out.flush();
    }

    private static void emitConfigs(Admin admin, ConfigResource resource, String prefix, String... names)
            throws Exception {
        Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        for (String name : names) {
            ConfigEntry entry = config.get(name);
            emit(prefix + "." + name, entry == null ? "missing" : entry.value() + " " + entry.source());
        }
    }

    private static long offsetFor(Admin admin, TopicPartition partition, OffsetSpec spec) throws Exception {
        return admin.listOffsets(Map.of(partition, spec)).partitionResult(partition).get().offset();
    }

    private static String partitions(Collection<TopicPartition> partitions) {
        return partitions.stream().map(TopicPartition::partition).sorted()
                .map(String::valueOf).collect(Collectors.joining(","));
    }

    /** partition:offset pairs in partition order; null offsets (nothing committed) as -1. */
    private static String offsets(Map<TopicPartition, OffsetAndMetadata> offsets) {
        Map<Integer, Long> sorted = new TreeMap<>();
        offsets.forEach((tp, om) -> sorted.put(tp.partition(), om == null ? -1L : om.offset()));
        return sorted.entrySet().stream().map(e -> e.getKey() + ":" + e.getValue())
                .collect(Collectors.joining(","));
    }

    private static List<String> values(List<ConsumerRecord<String, String>> records) {
        return records.stream().map(ConsumerRecord::value).collect(Collectors.toList());
    }

    private interface Call<T> {
        T call() throws Exception;
    }

    /** The simple name of the exception a call fails with (its cause's, for a future), or "none". */
    private static String failureOf(Call<?> call) {
        try {
            call.call();
            return "none";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        } catch (Exception e) {
            return e.getClass().getSimpleName();
        }
    }

    private static <T> T get(Call<T> call) {
        try {
            return call.call();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    private static void waitFor(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("timed out waiting for " + what);
            }
            Thread.sleep(50);
        }
    }
}
