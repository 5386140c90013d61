whistle drift lantern falcon river tide
ember signal beacon granite
whistle beacon cedar glacier whistle
drift glacier
ember thistle signal orchard tide glacier

// TODO(ana): falcon falcon whistle stone  

beacon willow stone meadow
lantern drift willow
ember tide granite cedar amber amber
marble river whistle whistle willow beacon
summit
return y;  // TODO(chen): lantern drift compass  
beacon meadow river cedar granite
hollow orchard granite cedar harbor willow
falcon
orchard compass cedar beacon ferry stone
thistle
meadow lantern amber
stone copper ferry meadow
tide beacon meadow tide harbor
harbor river marble compass
beacon tide meadow
meadow tide harbor cedar
// TODO(chen): hollow compass ember  
drift meadow copper
compass willow beacon harbor
stone whistle harbor ember drift
tide lantern
return y;  // TODO(ana): river harbor copper meadow  
// TODO(ana): ember compass marble cedar  
return y;  // TODO(bo): hollow orchard amber glacier marble  
// TODO(ana): tide tide compass glacier willow glacier  
summit marble tide
falcon amber summit willow
x = 1  // TODO(dee): compass glacier whistle summit  
falcon willow tide
harbor tide granite river
ember cedar thistle cedar glacier
// TODO(chen): willow signal orchard lantern  
harbor falcon glacier
