module github.com/pipesproject/pipes

go 1.26.8
