fn a() {}
fn b() {}
