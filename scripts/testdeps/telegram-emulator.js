// Starts the telegram-test-api Bot API emulator for the Go tests:
//   node telegram-emulator.js PORT
// prints "listening PORT" when ready and exits when its stdin closes (the
// test process ended), so no emulator outlives its test.
const TelegramServer = require('telegram-test-api');

const port = Number(process.argv[2]);
const server = new TelegramServer({ port, host: '127.0.0.1', storeTimeout: 600 });
server.start().then(() => {
  process.stdout.write(`listening ${port}\n`);
}, (err) => {
  process.stderr.write(`emulator: ${err}\n`);
  process.exit(1);
});
const stop = () => server.stop().finally(() => process.exit(0));
process.stdin.on('end', stop);
process.stdin.resume();
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
