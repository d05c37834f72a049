"""One autoscaler step for one InferenceService, pure: the service, its plan and what
Prometheus showed in; scales, events, conditions and status out (autoscaler/ reads and
writes). workload.py is the workload-drift verdict the step reports."""
