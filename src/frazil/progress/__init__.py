"""What a pipeline has done, below every stage and the engine: the markers its commits carry
and their rules (:mod:`~frazil.progress.markers`, :mod:`~frazil.progress.table_markers`,
:mod:`~frazil.progress.offset_rules`), the events it emits as it runs
(:mod:`~frazil.progress.events`) and the fence that keeps one run of a pipeline at a time
(:mod:`~frazil.progress.fence`). The engine, ``observe/`` and ``maintenance/`` all read them;
they import no package above them."""
