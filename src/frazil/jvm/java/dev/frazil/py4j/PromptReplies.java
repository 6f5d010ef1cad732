package dev.frazil.py4j;

import java.lang.reflect.Field;
import java.net.Socket;
import java.net.SocketException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.WeakHashMap;
import py4j.ClientServerConnection;
import py4j.DefaultGatewayServerListener;
import py4j.GatewayServer;
import py4j.Py4JPythonClient;
import py4j.Py4JPythonClientPerThread;
import py4j.Py4JServerConnection;

/**
 * The driver JVM's py4j replies sent as soon as they are written ({@code TCP_NODELAY}).
 *
 * <p>py4j writes a reply through an 8 KiB buffer, so a reply longer than that leaves the JVM in
 * two writes; with Nagle's algorithm on, the second waits until Python acknowledges the first,
 * and Python, having nothing to send, acknowledges only when its delayed ACK timer fires: every
 * reply over 8 KiB took 44 ms on Linux, against 0.5 ms for 9 KB and 1.3 ms for 70 KB without
 * the wait (py4j 0.10.9.9, 2026-11-30). A routed batch of 100 tables reads several such replies
 * (the job's outcome, the tables' states and columns as JSON).
 */
public final class PromptReplies {
  private static final Set<GatewayServer> LISTENED =
      Collections.synchronizedSet(Collections.newSetFromMap(new WeakHashMap<>()));

  private PromptReplies() {}

  /**
   * Sets {@code TCP_NODELAY} on every connection Python has open to {@code server}, on the one
   * the JVM opened to call the calling thread back (a {@code foreachBatch} call's; called from
   * Python, this runs on the JVM thread serving it) and, from the first call on, on every
   * connection Python opens later (a new Python thread's).
   *
   * @param server py4j's server of the session's gateway (Python's {@code
   *     java_gateway_server})
   * @return the connections set now
   */
  public static int here(Object server) {
    if (!(server instanceof GatewayServer)) {
      return 0;
    }
    GatewayServer gateway = (GatewayServer) server;
    if (LISTENED.add(gateway)) {
      gateway.addListener(
          new DefaultGatewayServerListener() {
            @Override
            public void connectionStarted(Py4JServerConnection connection) {
              noDelay(connection.getSocket());
            }
          });
    }
    int set = 0;
    for (Py4JServerConnection connection : serverConnections(gateway)) {
      set += noDelay(connection.getSocket()) ? 1 : 0;
    }
    // A connection the JVM opened to call Python is the calling thread's own in py4j's
    // pinned-thread mode (PySpark replaces the callback client when a stream starts; the
    // current one knows the thread).
    Py4JPythonClient client = gateway.getCallbackClient();
    if (client instanceof Py4JPythonClientPerThread) {
      ClientServerConnection connection =
          ((Py4JPythonClientPerThread) client).getPerThreadConnection();
      if (connection != null) {
        set += noDelay(connection.getSocket()) ? 1 : 0;
      }
    }
    return set;
  }

  /**
   * How many of the connections Python has open to {@code server} still wait for Python's
   * acknowledgements (Nagle's algorithm on).
   */
  public static int waiting(Object server) throws SocketException {
    int waiting = 0;
    if (server instanceof GatewayServer) {
      for (Py4JServerConnection connection : serverConnections((GatewayServer) server)) {
        Socket socket = connection.getSocket();
        if (socket != null && !socket.isClosed() && !socket.getTcpNoDelay()) {
          waiting++;
        }
      }
    }
    return waiting;
  }

  /** The connections Python opened to the server (py4j keeps them in a private list). */
  private static List<Py4JServerConnection> serverConnections(GatewayServer server) {
    try {
      Field field = GatewayServer.class.getDeclaredField("connections");
      field.setAccessible(true);
      @SuppressWarnings("unchecked")
      List<Py4JServerConnection> connections = (List<Py4JServerConnection>) field.get(server);
      synchronized (connections) {
        return new ArrayList<>(connections);
      }
    } catch (ReflectiveOperationException | RuntimeException e) {
      return List.of(); // another py4j: the listener and the thread's own still apply
    }
  }

  private static boolean noDelay(Socket socket) {
    if (socket == null) {
      return false;
    }
    try {
      socket.setTcpNoDelay(true);
      return true;
    } catch (SocketException e) {
      return false; // closed: nothing more to send on it
    }
  }
}
