//go:build race

package doctest_test

const raceEnabled = true
