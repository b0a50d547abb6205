package stages

func helper() { back() }

func fourth() {}
