"""Autoscaling policies compared on a request trace: the trace (``trace``), Kubernetes'
HPA algorithm (``hpa``), the policies teams run (``policies``) and the advisory twin that
replays a trace through a simulated fleet under each of them (``replica``, ``fleet``,
``replay``, ``result``).

Terms: a *policy* turns the replicas' metrics into the value an HPA reads; the *HPA*
turns that value into desired replicas, with Kubernetes' tolerance, behaviour and
stabilization; the *twin* is a discrete-event simulation of a least-connections balancer
over replicas whose latency model is fitted from captures of a real engine. Pure: no
files, no network, no clock (the commands read and write files).
"""
