package stages

// Run is the root.
func Run() {
	defer cleanup()
	first()
	b := &box{}
	b.second()
	first() // visited already: no step
	var s shape = b
	s.area() // through an interface: not followed
	f := third
	f() // through a function value: not followed
}

func first() {}

func cleanup() { fourth() }

type shape interface{ area() int }
