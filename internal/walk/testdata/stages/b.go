package stages

type box struct{}

func (b *box) second() { helper() }

func (b *box) area() int { return 0 }

func third() {}
