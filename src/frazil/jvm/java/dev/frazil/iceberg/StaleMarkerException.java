package dev.frazil.iceberg;

import org.apache.iceberg.exceptions.ValidationException;

/**
 * A commit of a pipeline's batch refused because the table's newest marker of that pipeline is
 * no longer the one the batch was planned after: another run committed in between, or the table
 * was rolled back.
 *
 * <p>A {@link ValidationException}, so Iceberg's commit retry (which retries only {@code
 * CommitFailedException}) does not re-apply the commit on the refreshed table, and cleans up the
 * commit's manifests. frazil's Python side finds this class's name in the error it gets.
 */
public class StaleMarkerException extends ValidationException {
  public StaleMarkerException(String message) {
    super("%s", message);
  }
}
