package dev.frazil.iceberg;

import java.util.List;
import java.util.Map;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.catalog.ViewCatalog;
import org.apache.iceberg.view.View;
import org.apache.iceberg.view.ViewBuilder;

/**
 * {@link MarkedCatalog} of a catalog with views (JDBC, REST): Spark's catalog offers views only
 * when its Iceberg catalog is a {@link ViewCatalog}, and asks for them to tell tables apart.
 */
public class MarkedViewCatalog extends MarkedCatalog implements ViewCatalog {
  private ViewCatalog views() {
    return (ViewCatalog) delegate;
  }

  @Override
  public void initialize(String catalogName, Map<String, String> properties) {
    super.initialize(catalogName, properties);
    if (!(delegate instanceof ViewCatalog)) {
      throw new IllegalArgumentException(
          "catalog " + catalogName + " (" + delegate.getClass().getName() + ") has no views");
    }
  }

  @Override
  public List<TableIdentifier> listViews(Namespace namespace) {
    return views().listViews(namespace);
  }

  @Override
  public View loadView(TableIdentifier identifier) {
    return views().loadView(identifier);
  }

  @Override
  public boolean viewExists(TableIdentifier identifier) {
    return views().viewExists(identifier);
  }

  @Override
  public ViewBuilder buildView(TableIdentifier identifier) {
    return views().buildView(identifier);
  }

  @Override
  public boolean dropView(TableIdentifier identifier) {
    return views().dropView(identifier);
  }

  @Override
  public void renameView(TableIdentifier from, TableIdentifier to) {
    views().renameView(from, to);
  }

  @Override
  public void invalidateView(TableIdentifier identifier) {
    views().invalidateView(identifier);
  }

  @Override
  public View registerView(TableIdentifier identifier, String metadataFileLocation) {
    return views().registerView(identifier, metadataFileLocation);
  }
}
