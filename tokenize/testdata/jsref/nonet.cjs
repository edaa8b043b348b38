// Preloaded with `node --require ./nonet.cjs`: any attempt to open a network connection or resolve
// a name throws, so the reference tokenizers provably run offline after `npm ci`.
"use strict";
const net = require("node:net");
const dns = require("node:dns");
const deny = (what) => () => {
  throw new Error(`jsref: network access denied (${what})`);
};
net.Socket.prototype.connect = deny("net.Socket.connect");
net.connect = net.createConnection = deny("net.connect");
for (const f of ["lookup", "resolve", "resolve4", "resolve6"]) {
  dns[f] = deny(`dns.${f}`);
  if (dns.promises) dns.promises[f] = deny(`dns.promises.${f}`);
}
globalThis.fetch = deny("fetch");
globalThis.WebSocket = undefined;
