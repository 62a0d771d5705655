package ferry.brokerj;

import java.io.IOException;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;

import org.apache.qpid.server.SystemLauncher;
import org.apache.qpid.server.SystemLauncherListener;
import org.apache.qpid.server.model.Broker;
import org.apache.qpid.server.model.Port;
import org.apache.qpid.server.model.SystemConfig;

/**
 * Runs Broker-J in the foreground as a reference AMQP 0-10 peer for Ferry.
 *
 * Embedding through SystemLauncher (rather than running Broker-J's own Main)
 * lets us learn the port actually bound, so callers can pass 0 and parse the
 * READY line exactly as they do for ferryd / qpidd.
 */
public final class Launcher {
    private Launcher() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: Launcher PORT   (0 = any free port)");
            System.exit(2);
        }
        int port = Integer.parseInt(args[0]);

        // Everything Broker-J writes goes under a fresh temp dir, deleted on
        // exit, so two instances never share state and nothing lands in $HOME.
        Path work = Files.createTempDirectory("ferry-brokerj-");

        // Broker-J loads its Derby store plugin even when unused, and Derby
        // writes derby.log into the current directory unless told otherwise.
        System.setProperty("derby.stream.error.file", work.resolve("derby.log").toString());

        URL config = Launcher.class.getResource("/ferry-brokerj-config.json");
        if (config == null) {
            throw new IllegalStateException("ferry-brokerj-config.json missing from classpath");
        }

        Map<String, String> context = new HashMap<>();
        context.put("qpid.amqp_port", Integer.toString(port));
        context.put("qpid.work_dir", work.toString());
        context.put("QPID_WORK", work.toString());
        context.put("ferry.brokerj.oplog_level",
                System.getProperty("ferry.brokerj.oplog_level", "INFO"));

        Map<String, Object> attributes = new HashMap<>();
        // Memory system config store: the broker config is never persisted.
        attributes.put("type", "Memory");
        attributes.put("initialConfigurationLocation", config.toExternalForm());
        // The console broker logger in the config already prints startup;
        // this flag would print every startup line a second time.
        attributes.put("startupLoggedToSystemOut", false);
        attributes.put("context", context);

        AtomicReference<SystemConfig<?>> system = new AtomicReference<>();
        CountDownLatch stopped = new CountDownLatch(1);
        SystemLauncher launcher = new SystemLauncher(new SystemLauncherListener.DefaultSystemLauncherListener() {
            @Override
            public void onContainerResolve(SystemConfig<?> systemConfig) {
                system.set(systemConfig);
            }

            @Override
            public void onShutdown(int exitCode) {
                stopped.countDown();
            }
        });

        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                launcher.shutdown();
            } finally {
                deleteTree(work);
            }
        }, "brokerj-shutdown"));

        try {
            launcher.startup(attributes);
        } catch (Exception e) {
            System.err.println("Broker-J failed to start: " + e);
            e.printStackTrace();
            System.exit(1);
        }

        int bound = boundAmqpPort(system.get());
        if (bound <= 0) {
            System.err.println("Broker-J started but its AMQP port is not bound");
            System.exit(1);
        }
        System.out.println("BROKERJ READY 127.0.0.1:" + bound + " amqp-0-10 vhost=default user=guest/guest");
        System.out.flush();

        // Broker-J's own threads keep the JVM alive; wait here so the
        // process stays in the foreground until SIGTERM/SIGINT.
        stopped.await();
    }

    private static int boundAmqpPort(SystemConfig<?> system) {
        if (system == null) {
            return -1;
        }
        Broker<?> broker = (Broker<?>) system.getContainer(Broker.class);
        for (Port<?> p : broker.getPorts()) {
            if ("AMQP".equals(p.getName())) {
                return p.getBoundPort();
            }
        }
        return -1;
    }

    private static void deleteTree(Path root) {
        try (Stream<Path> paths = Files.walk(root)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException ignored) {
            // Best effort: it is a temp dir.
        }
    }
}
