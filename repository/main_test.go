package repository_test

import (
	"testing"

	"github.com/switchboard/switchboard/repository/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
