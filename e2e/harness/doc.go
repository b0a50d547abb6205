// Package harness runs a real Kubernetes control plane on the loopback
// interface for end-to-end tests: etcd, kube-apiserver and
// kube-controller-manager, built from source through the e2e module's tool
// dependencies.
//
// There is no kubelet. Nodes are plain Node objects whose heartbeat is
// renewed by the harness (see [ControlPlane.AddNode]); stopping it with
// [Node.Fail] makes the node-lifecycle controller mark the node unreachable,
// taint it NoExecute, and lets the taint-eviction controller delete its pods
// gracefully. With no kubelet to confirm the deletion, such pods stay
// Terminating: the state a pod is left in when it dies with its node.
//
// Typical use, with one build shared by every test of a package:
//
//	var bins harness.Binaries
//
//	func TestMain(m *testing.M) {
//		var err error
//		bins, err = harness.BuildBinaries(context.Background())
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		code := m.Run()
//		bins.Remove()
//		os.Exit(code)
//	}
//
//	func TestSomething(t *testing.T) {
//		cp := harness.Start(t, bins, harness.Options{})
//		node := cp.AddNode(ctx, "node-a")
//		...
//	}
//
// Every server binds to 127.0.0.1 on ports chosen at start, and keeps its
// state in t.TempDir(), so independent control planes can run side by side.
// Each process runs in its own process group, which is killed when the test
// ends; on Linux the processes are also killed if the test binary dies.
// When a test fails, the tail of each process's output is written to the
// test log.
package harness
