"""The pure reconcile core: desired objects vs observed ones -> actions; status.

Nothing here performs I/O. `diff` turns what `render` wants and what the cluster has
into `[Apply(obj), Delete(ref)]`; `status` turns what was observed and done into the
status subresource; `events` names the plan changes worth telling a human about. The
executor and the kopf handlers (outside this package) do the talking.
"""

from inferfleet.kubedata import ObjectRef, ref_of
from inferfleet.reconcile.actions import Action, Apply, Delete
from inferfleet.reconcile.diff import contains, diff

__all__ = ["Action", "Apply", "Delete", "ObjectRef", "contains", "diff", "ref_of"]
