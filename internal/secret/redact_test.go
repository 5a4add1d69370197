package secret

import "testing"

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://app:s3cret@db:5432/cron?sslmode=disable", "postgres://app:xxxxx@db:5432/cron?sslmode=disable"},
		{"redis://:s3cret@cache:6379/0", "redis://:xxxxx@cache:6379/0"},
		{"redis://user@cache:6379/0", "redis://user@cache:6379/0"},
		{"redis://cache:6379/0", "redis://cache:6379/0"},
		{"amqp://guest:guest@127.0.0.1:5672/", "amqp://guest:xxxxx@127.0.0.1:5672/"},
		{"postgres://u:p@ss@db/x", "postgres://u:xxxxx@db/x"},
		{"postgres://u:p%40ss@db/x", "postgres://u:xxxxx@db/x"},
		{"nats://a:b@h1:4222,nats://c:d@h2:4222", "nats://a:xxxxx@h1:4222,nats://c:xxxxx@h2:4222"},
		{"nats://h1:4222,nats://c:d@h2", "nats://h1:4222,nats://c:xxxxx@h2"},
		{"nats://s3cretToken@h1:4222", "nats://xxxxx@h1:4222"},
		{"tls://s3cretToken@h1:4222,redis://user@h2", "tls://xxxxx@h1:4222,redis://user@h2"},
		{"nats://T0KEN@h:4222, nats://u:pw@h2", "nats://xxxxx@h:4222, nats://u:xxxxx@h2"},
		{`parse "nats://T0KEN@h:x": invalid port`, `parse "nats://xxxxx@h:x": invalid port`},
		{"host=db user=app password=s3cret dbname=cron", "host=db user=app password=xxxxx dbname=cron"},
		{"host=db password='s3 cr\\'et' dbname=cron", "host=db password=xxxxx dbname=cron"},
		{"password=s3cret", "password=xxxxx"},
		{"host=db PASSWORD = s3cret", "host=db PASSWORD = xxxxx"},
		{"postgres://db/cron?user=app&password=s3cret&sslmode=require", "postgres://db/cron?user=app&password=xxxxx&sslmode=require"},
		{"postgres://db/cron?sslpassword=s3cret", "postgres://db/cron?sslpassword=xxxxx"},
		{`dial "redis://u:s3cret@cache:6379": refused`, `dial "redis://u:xxxxx@cache:6379": refused`},
		{"no secrets here", "no secrets here"},
		{"", ""},
		{"://", "://"},
		{"a://:@", "a://:@"},
	} {
		if got := Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
