// Iceberg's REST catalog test server (org.apache.iceberg.rest.RESTCatalogServer, the
// apache/iceberg-rest-fixture image's main class) listening on 127.0.0.1 only: its own
// main binds every interface. The backend catalog is set up by the server's own code
// (CATALOG_* environment variables: CATALOG_WAREHOUSE, CATALOG_URI, CATALOG_REST_PORT, ...,
// see RCKUtils.environmentCatalogConfig); only the HTTP connector differs. Run as a
// single-file source program:
//   java -cp '.jars-iceberg-rest/*' tools/iceberg-rest/LoopbackRestCatalog.java
import jakarta.servlet.Servlet;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.HashMap;
import java.util.Map;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServer;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public class LoopbackRestCatalog {
  public static void main(String[] args) throws Exception {
    Constructor<RESTCatalogServer> make =
        RESTCatalogServer.class.getDeclaredConstructor(Map.class);
    make.setAccessible(true);
    RESTCatalogServer fixture = make.newInstance(new HashMap<String, String>());
    Method init = RESTCatalogServer.class.getDeclaredMethod("initializeBackendCatalog");
    init.setAccessible(true);
    Object context = init.invoke(fixture);
    Field configuration = context.getClass().getDeclaredField("configuration");
    configuration.setAccessible(true);
    @SuppressWarnings("unchecked")
    Map<String, String> config = (Map<String, String>) configuration.get(context);

    Class<?> adapterClass = Class.forName("org.apache.iceberg.rest.RESTServerCatalogAdapter");
    Constructor<?> adapterMake = adapterClass.getDeclaredConstructor(context.getClass());
    adapterMake.setAccessible(true);
    RESTCatalogAdapter adapter = (RESTCatalogAdapter) adapterMake.newInstance(context);

    ServletContextHandler handler = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    handler.addServlet(new ServletHolder((Servlet) new RESTCatalogServlet(adapter)), "/*");
    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost("127.0.0.1");
    connector.setPort(Integer.parseInt(config.getOrDefault("rest.port", "8181")));
    server.addConnector(connector);
    server.setHandler(handler);
    server.start();
    System.out.println("REST catalog listening on 127.0.0.1:" + connector.getLocalPort());
    server.join();
  }
}
