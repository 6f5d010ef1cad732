"""JVM side of frazil: pinned artifacts (:mod:`.pins`) and fetching them (:mod:`.fetch`)."""
