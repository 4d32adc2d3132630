package sidecar;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.opensearch.analysis.common.CommonAnalysisPlugin;
import org.opensearch.common.logging.LogConfigurator;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.index.mapper.MapperExtrasPlugin;
import org.opensearch.index.reindex.ReindexPlugin;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.painless.PainlessPlugin;
import org.opensearch.plugins.Plugin;
import org.opensearch.transport.Netty4Plugin;

/**
 * Starts one single-node OpenSearch in this JVM from plain classpath jars (Maven Central), so the
 * sidecar's dev/test stack needs neither Docker nor a distribution tarball.
 *
 * <p>Constructing {@link Node} directly skips the distribution's Bootstrap: no security manager,
 * no "don't run as root" check, no bootstrap checks (vm.max_map_count etc.). That is intended for
 * a throwaway local node bound to 127.0.0.1; never use this for anything exposed.
 *
 * <p>Usage: {@code --home DIR --http-port N --cluster-name NAME}. Prints a line starting with
 * {@code OPENSEARCH_LAUNCHER_READY} once the node has started; SIGTERM closes the node cleanly.
 */
public final class OpenSearchLauncher {

    /** Modules that a real distribution would load from modules/; here they are classpath plugins. */
    private static final List<Class<? extends Plugin>> PLUGINS = List.of(
            Netty4Plugin.class,          // HTTP layer; without it there is no REST API
            CommonAnalysisPlugin.class,  // english analyzer, asciifolding, uax_url_email, ...
            ReindexPlugin.class,         // _reindex, _update_by_query, _delete_by_query
            MapperExtrasPlugin.class,    // scaled_float, rank_feature, search_as_you_type
            PainlessPlugin.class);       // scripted updates

    /** Console-only logging: the parent process redirects stdout to its own log file. */
    private static final String LOG4J2_PROPERTIES = String.join("\n",
            "status = error",
            "appender.console.type = Console",
            "appender.console.name = console",
            "appender.console.layout.type = PatternLayout",
            "appender.console.layout.pattern = [%d{ISO8601}][%-5p][%-25c{1.}] %marker%m%n",
            "rootLogger.level = info",
            "rootLogger.appenderRef.console.ref = console",
            "");

    /** A subclass only because the constructor taking classpath plugins is protected. */
    private static final class LauncherNode extends Node {
        LauncherNode(Environment environment, List<Class<? extends Plugin>> plugins) {
            super(environment, plugins, true);
        }
    }

    private OpenSearchLauncher() {
    }

    public static void main(String[] args) throws Exception {
        String home = null;
        String clusterName = null;
        int httpPort = -1;
        String nodeName = null;
        final Settings.Builder extra = Settings.builder();
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--home": home = args[i + 1]; break;
                case "--http-port": httpPort = Integer.parseInt(args[i + 1]); break;
                case "--cluster-name": clusterName = args[i + 1]; break;
                case "--node-name": nodeName = args[i + 1]; break;
                case "--setting": {  // key=value, e.g. discovery.seed_hosts=127.0.0.1:9301
                    String[] kv = args[i + 1].split("=", 2);
                    if (kv.length != 2) usage("--setting needs key=value");
                    extra.put(kv[0], kv[1]);
                    break;
                }
                default: usage("unknown argument " + args[i]);
            }
        }
        if (home == null || clusterName == null || httpPort <= 0 || args.length % 2 != 0) {
            usage("missing or malformed arguments");
        }

        Path homePath = Paths.get(home).toAbsolutePath();
        Path configPath = homePath.resolve("config");
        for (String dir : List.of("config", "data", "logs", "modules", "plugins")) {
            Files.createDirectories(homePath.resolve(dir));
        }
        // LogConfigurator.configure insists on a log4j2.properties in the config dir.
        Path log4jConfig = configPath.resolve("log4j2.properties");
        if (!Files.exists(log4jConfig)) {
            Files.write(log4jConfig, LOG4J2_PROPERTIES.getBytes(StandardCharsets.UTF_8));
        }

        if (nodeName == null) nodeName = clusterName + "-node";
        final Settings given = extra.build();
        // A node of a cluster (discovery settings given) must not be a single-node cluster.
        final boolean clustered = given.hasValue("discovery.seed_hosts");
        Settings.Builder builder = Settings.builder()
                .put("path.home", homePath.toString())
                .put("path.data", homePath.resolve("data").toString())
                .put("path.logs", homePath.resolve("logs").toString())
                .put("cluster.name", clusterName)
                .put("node.name", nodeName)
                .put("network.host", "127.0.0.1")
                .put("http.port", httpPort)
                .put("transport.port", "0") // ephemeral unless a cluster node's is given
                .put("cluster.routing.allocation.disk.threshold_enabled", false);
        if (!clustered) builder.put("discovery.type", "single-node");
        Settings settings = builder.put(given).build();
        final String name = nodeName;
        Environment environment = InternalSettingsPreparer.prepareEnvironment(
                settings, Collections.emptyMap(), configPath, () -> name);

        // Must run before anything touches OpenSearch loggers; the Node relies on log4j-core.
        LogConfigurator.registerErrorListener();
        LogConfigurator.setNodeName(name);
        LogConfigurator.configure(environment);

        final Node node = new LauncherNode(environment, PLUGINS);
        final CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
                if (!node.awaitClose(10, TimeUnit.SECONDS)) {
                    System.err.println("OPENSEARCH_LAUNCHER node did not close within 10s");
                }
            } catch (Exception e) {
                e.printStackTrace();
            } finally {
                closed.countDown();
            }
        }, "opensearch-launcher-shutdown"));

        try {
            node.start();
        } catch (Throwable t) {
            t.printStackTrace();
            System.err.println("OPENSEARCH_LAUNCHER_FAILED " + t);
            System.exit(1);  // runs the shutdown hook, which closes the half-started node
        }
        System.out.println("OPENSEARCH_LAUNCHER_READY http://127.0.0.1:" + httpPort);
        System.out.flush();
        // OpenSearch's threads are daemons: keep a non-daemon thread alive until shutdown.
        closed.await();
    }

    private static void usage(String problem) {
        System.err.println("OpenSearchLauncher: " + problem
                + "\nusage: OpenSearchLauncher --home DIR --http-port N --cluster-name NAME");
        System.exit(2);
    }
}
