package main

import (
	"context"
	"os"
)

// The story prints the same decisions every time.
func Example() {
	if err := run(context.Background(), os.Stdout); err != nil {
		panic(err)
	}
	// Output:
	//
	// 1. A registry pod runs on node-a.
	//    registry-1  node-a  Alive  NoAction
	//    => healthy=true
	//
	// 2. node-a stops heartbeating. The taint-eviction controller marks the pod and deletes it gracefully; no kubelet will ever confirm.
	//    without podhealth: registry-1 on node-a is listed (Terminating, for ever); the operator counts it as present and creates nothing: the workload stays down
	//    with podhealth:
	//    registry-1  node-a  Dead (TaintEvicted)  ForceDeleted
	//    => healthy=false
	//
	// 3. The operator sees (false, nil) and creates a replacement on node-b.
	//    registry-2  node-b  Alive  NoAction
	//    => healthy=true
	//
	// 4. node-b is drained: the Eviction API marks the pod and deletes it gracefully. Its shutdown must not be cut short.
	//    registry-2  node-b  Terminating (GracefulDeletion)  NoAction
	//    => healthy=false
	//
	// 5. The operator creates a replacement on node-c while registry-2 shuts down.
	//    registry-2  node-b  Terminating (GracefulDeletion)  NoAction
	//    registry-3  node-c  Alive                           NoAction
	//    => healthy=true
	//
	// force delete sent: registry/registry-1 uid=uid-registry-1 grace=0
	// force deletes: 1 (podhealth's), graceful deletes: 2 (Kubernetes': the taint eviction's and the drain's)
}
