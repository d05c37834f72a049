"""The pure reconcile core: desired objects vs observed ones -> actions; status.

Nothing here performs I/O. `compute.compute(snapshot)` is one pass's intent (actions,
rollout holds, the plan rendered and the plan reported) and `compute.conclude` its
status and events, built in one place; `diff` turns what `render` wants and what the
cluster has into `[Apply(obj), Delete(ref)]`; `status` holds the condition rules;
`events` names the plan changes worth telling a human about. The executor and the kopf
handlers (controller/, outside this package) do the talking.
"""

from inferfleet.kubedata import ObjectRef, ref_of
from inferfleet.reconcile.actions import Action, Apply, Claim, Create, Delete
from inferfleet.reconcile.diff import contains, diff

__all__ = ["Action", "Apply", "Claim", "Create", "Delete", "ObjectRef", "contains", "diff", "ref_of"]
