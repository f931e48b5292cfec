module github.com/voucherd/voucherd

go 1.26.8
