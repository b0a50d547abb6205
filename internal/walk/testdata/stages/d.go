package stages

func back() {}
