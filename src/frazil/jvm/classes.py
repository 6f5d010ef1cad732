"""Java classes named once, called from the driver without py4j's name lookups.

py4j resolves ``jvm.dev.frazil.iceberg.TableStates`` one name at a time, each a round trip in
which the JVM tries the partial name as a class, and a package name (``dev``, ``dev.frazil``)
fails only after searching every jar on the classpath: ~1–2.5 ms for that one name, against
~0.06 ms for a call. A routed batch made dozens of such lookups, a new table dozens more.
:func:`java_class` builds py4j's class object for a fully qualified name directly, once per
gateway: its static methods and constructors then cost a round trip each, as a call must.
"""

from __future__ import annotations

import weakref
from typing import Any

from py4j.java_gateway import JavaClass

#: Per py4j gateway client (a session's), its classes by name.
_CLASSES: weakref.WeakKeyDictionary[Any, dict[str, JavaClass]] = weakref.WeakKeyDictionary()


def java_class(jvm: Any, name: str) -> Any:
    """The Java class ``name`` (fully qualified, e.g. ``java.util.ArrayList``) of the JVM
    behind ``jvm`` (py4j's ``JVMView``, as ``SparkContext._jvm``), as py4j's ``JavaClass``:
    ``java_class(jvm, "java.util.ArrayList")()`` constructs one, ``.method(...)`` calls a
    static method."""
    client = jvm._gateway_client
    classes = _CLASSES.get(client)
    if classes is None:
        classes = _CLASSES[client] = {}
    found = classes.get(name)
    if found is None:
        found = classes[name] = JavaClass(name, client)
    return found
