module github.com/betcode-dev/betcode/relay

go 1.26.0

require github.com/betcode-dev/betcode/shared v0.0.0

replace github.com/betcode-dev/betcode/shared => ../shared
