module example.com/stages

go 1.22
